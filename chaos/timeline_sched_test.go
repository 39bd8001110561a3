package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// script records what scripted faults did, in order, and the events the timeline
// emitted. It is shared by every fault of a test, and used concurrently.
type script struct {
	mu     sync.Mutex
	calls  []string
	events []ledger.Event
}

func (s *script) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, what)
}

func (s *script) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *script) emit(ev ledger.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
}

// eventLog renders the events as "type:fault[:passed]".
func (s *script) eventLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, ev := range s.events {
		e := string(ev.Type) + ":" + ev.Fault
		if ev.Passed != nil {
			e += fmt.Sprintf(":%v", *ev.Passed)
		}
		out = append(out, e)
	}
	return out
}

// of keeps the entries of log that name fault.
func of(log []string, fault string) []string {
	var out []string
	for _, l := range log {
		if parts := strings.Split(l, ":"); len(parts) > 1 && parts[1] == fault {
			out = append(out, l)
		}
	}
	return out
}

// scriptFault is a hand-written Fault whose calls are recorded in a script.
type scriptFault struct {
	name string
	s    *script
	// applyErr makes Apply fail.
	applyErr error
	// gate, when set, makes Verify block until it is closed (then succeed) or its ctx
	// ends (then fail): a slow verification.
	gate chan struct{}
	// revertSleep makes Revert slow.
	revertSleep time.Duration
	// onRevert runs at the end of Revert.
	onRevert func()
}

func (f *scriptFault) Apply(context.Context, Env) error {
	f.s.note("apply:" + f.name)
	return f.applyErr
}

func (f *scriptFault) Verify(ctx context.Context, _ Env) error {
	if f.gate == nil {
		return nil
	}
	select {
	case <-f.gate:
		f.s.note("verified:" + f.name)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no proof yet: %w", ctx.Err())
	}
}

func (f *scriptFault) Revert(context.Context, Env) error {
	if f.revertSleep > 0 {
		time.Sleep(f.revertSleep)
	}
	f.s.note("revert:" + f.name)
	if f.onRevert != nil {
		f.onRevert()
	}
	return nil
}

// scripted builds a timeline of specs (type decode_crash, which needs nothing to be
// built) whose faults are replaced by the given scripted ones, matched by name.
func scripted(t *testing.T, specs []scenarios.Fault, faults []*scriptFault, opts ...TimelineOption) *Timeline {
	t.Helper()
	for i := range specs {
		specs[i].Type, specs[i].Target = "decode_crash", "decode-0"
	}
	tl, err := NewTimeline(specs, append([]TimelineOption{WithLogger(quietLogger())}, opts...)...)
	require.NoError(t, err)
	for _, f := range faults {
		found := false
		for _, e := range tl.entries {
			if e.spec.Name == f.name {
				e.fault, found = f, true
			}
		}
		if !found {
			t.Fatalf("no fault %q", f.name)
		}
	}
	return tl
}

// waitBound bounds a wait for something that must happen: far above what a loaded
// machine (CI under stress-ng, -race) delays it by, and never reached when all is well.
const waitBound = 30 * time.Second

// waitFor polls (bounded) until log contains want.
func waitFor(t *testing.T, log func() []string, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return slices.Contains(log(), want) }, waitBound, 2*time.Millisecond,
		"never saw %q", want)
}

// A fault whose verification is slow does not hold up a fault scheduled to overlap
// it: the second starts, is verified and is reverted on its own schedule while the
// first is still verifying. (Run one step at a time, the second fault would wait for
// the first's proof, which here comes only after the second's revert: a deadlock the
// test's bounded wait reports.)
func TestTimelineSlowVerifyDoesNotDelayOthers(t *testing.T) {
	s := &script{}
	gate := make(chan struct{})
	slow := &scriptFault{name: "slow", s: s, gate: gate}
	quick := &scriptFault{name: "quick", s: s, onRevert: func() { close(gate) }}
	tl := scripted(t, []scenarios.Fault{
		{Name: "slow", At: ms_(0)}, // held until the run ends
		{Name: "quick", At: ms_(20), For: ms_(30)},
	}, []*scriptFault{slow, quick})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	env := &FuncEnv{EmitFunc: s.emit}
	go func() { done <- tl.Run(ctx, env, time.Now()) }()
	var runErr error
	func() {
		defer func() { cancel(); runErr = <-done }() // Run has returned, even on a failed wait
		waitFor(t, s.eventLog, "fault_verified:slow:true")
	}()
	if runErr != nil {
		t.Fatalf("Run = %v, want nil", runErr)
	}
	require.Equal(t, []string{"apply:slow", "apply:quick", "revert:quick", "verified:slow", "revert:slow"}, s.log(), "calls")
	events := s.eventLog()
	for _, f := range []string{"slow", "quick"} {
		want := []string{"fault_start:" + f, "fault_verified:" + f + ":true", "fault_stop:" + f}
		assert.Equal(t, want, of(events, f), "%s events", f)
	}
	for _, ev := range s.events {
		if ev.FaultType != "decode_crash" || ev.Target != "decode-0" || ev.Time.IsZero() {
			t.Errorf("event lacks fields: %+v", ev)
		}
	}
}

// A fault still verifying when it is due to be reverted is ErrNotVerified at its
// revert time (not after the verify timeout); the other faults are reverted too,
// latest first.
func TestTimelineVerifyCutAtRevert(t *testing.T) {
	s := &script{}
	never := &scriptFault{name: "never", s: s, gate: make(chan struct{})}
	held := &scriptFault{name: "held", s: s}
	tl := scripted(t, []scenarios.Fault{
		{Name: "never", At: ms_(0), For: ms_(50)},
		{Name: "held", At: ms_(0)},
	}, []*scriptFault{never, held}, WithVerifyTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	err := tl.Run(ctx, &FuncEnv{EmitFunc: s.emit}, time.Now())
	if !errors.Is(err, ErrNotVerified) || !strings.Contains(err.Error(), "before its revert at 50ms") {
		t.Fatalf("Run = %v, want ErrNotVerified before its revert", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run outlived its context: the verification was not cut at the revert")
	}
	// Same instant: "never" is applied before "held" (spec order), so it is reverted
	// after it.
	require.Equal(t, []string{"apply:never", "apply:held", "revert:held", "revert:never"}, s.log(), "calls")
	events := s.eventLog()
	assert.Equal(t, []string{"fault_start:never", "fault_verified:never:false", "fault_stop:never"}, of(events, "never"), "never events")
	assert.Equal(t, []string{"fault_start:held", "fault_verified:held:true", "fault_stop:held"}, of(events, "held"), "held events")
}

// A failure in one fault cancels the others, including one still verifying (its
// verification fails without adding an error), and everything applied is reverted,
// latest first.
func TestTimelineFailureCancelsAndRevertsAll(t *testing.T) {
	s := &script{}
	faults := []*scriptFault{
		{name: "held", s: s},
		{name: "verifying", s: s, gate: make(chan struct{})},
		{name: "broken", s: s, applyErr: errors.New("admin API refused")},
	}
	tl := scripted(t, []scenarios.Fault{
		{Name: "held", At: ms_(0)},
		{Name: "verifying", At: ms_(0), For: scenarios.Duration(time.Hour)},
		{Name: "broken", At: ms_(20), For: ms_(10)},
		{Name: "later", At: scenarios.Duration(time.Hour)},
	}, faults, WithVerifyTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	err := tl.Run(ctx, &FuncEnv{EmitFunc: s.emit}, time.Now())
	if !errors.Is(err, ErrApply) || !strings.Contains(err.Error(), "admin API refused") {
		t.Fatalf("Run = %v, want ErrApply", err)
	}
	if errors.Is(err, ErrNotVerified) {
		t.Errorf("the cancelled verification added an error: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run outlived its context")
	}
	require.Equal(t, []string{"apply:held", "apply:verifying", "apply:broken", "revert:broken", "revert:verifying", "revert:held"}, s.log(), "calls")
	events := s.eventLog()
	for f, want := range map[string][]string{
		"held":      {"fault_start:held", "fault_verified:held:true", "fault_stop:held"},
		"verifying": {"fault_start:verifying", "fault_verified:verifying:false", "fault_stop:verifying"},
		"broken":    {"fault_start:broken", "fault_verified:broken:false", "fault_stop:broken"},
		"later":     nil,
	} {
		assert.Equal(t, want, of(events, f), "%s events", f)
	}
	for _, ev := range s.events {
		if ev.Fault == "verifying" && ev.Type == ledger.EventFaultVerified && !strings.Contains(ev.Detail, "aborted") {
			t.Errorf("aborted verification detail = %q", ev.Detail)
		}
	}
}

// Steps due at the same instant keep their order: a fault applied where another is
// reverted waits for that (slow) revert.
func TestTimelineSameInstantRevertBeforeApply(t *testing.T) {
	s := &script{}
	tl := scripted(t, []scenarios.Fault{
		{Name: "first", At: ms_(0), For: ms_(20)},
		{Name: "second", At: ms_(20), For: ms_(10)},
	}, []*scriptFault{{name: "first", s: s, revertSleep: 30 * time.Millisecond}, {name: "second", s: s}})
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	require.NoError(t, tl.Run(ctx, &FuncEnv{EmitFunc: s.emit}, time.Now()), "Run =")
	require.Equal(t, []string{"apply:first", "revert:first", "apply:second", "revert:second"}, s.log(), "calls")
	want := []string{"fault_start:first", "fault_verified:first:true", "fault_stop:first",
		"fault_start:second", "fault_verified:second:true", "fault_stop:second"}
	require.Equal(t, want, s.eventLog(), "events")
}

// The injected clock stamps the events.
func TestTimelineInjectedClock(t *testing.T) {
	s := &script{}
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	tl := scripted(t, []scenarios.Fault{
		{Name: "a", At: ms_(0), For: ms_(5)},
		{Name: "b", At: ms_(0), For: ms_(5)},
	}, []*scriptFault{{name: "a", s: s}, {name: "b", s: s}}, WithClock(clock))
	require.NoError(t, tl.Run(context.Background(), &FuncEnv{EmitFunc: s.emit}, time.Now()), "Run =")
	seen := map[time.Time]bool{}
	for _, ev := range s.events {
		if ev.Time.Year() != 2030 || seen[ev.Time] {
			t.Errorf("event time %v not from the injected clock (or repeated)", ev.Time)
		}
		seen[ev.Time] = true
	}
	if len(seen) != 6 {
		t.Errorf("%d events, want 6", len(seen))
	}
}
