package chaos

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
	"pdsoak/supervisor"
)

func ms_(n int) scenarios.Duration { return scenarios.Duration(time.Duration(n) * time.Millisecond) }

func TestTimelineSteps(t *testing.T) {
	tl, err := NewTimeline([]scenarios.Fault{
		{Name: "late", Type: "process_pause", Target: "decode-0", At: ms_(50), For: ms_(10)},
		{Name: "early", Type: "network_partition", Target: "l", At: ms_(0), For: ms_(50)},
		{Name: "held", Type: "decode_crash", Target: "decode-0", At: ms_(20)},
	})
	require.NoError(t, err)
	var got []string
	for _, s := range tl.Steps() {
		got = append(got, s.At.String()+" "+string(s.Kind)+" "+s.Fault.Name)
	}
	want := []string{"0s apply early", "20ms apply held", "50ms revert early", "50ms apply late", "60ms revert late"}
	require.Equal(t, want, got, "steps")
}

func TestNewTimelineReportsAllErrors(t *testing.T) {
	_, err := NewTimeline([]scenarios.Fault{
		{Name: "a", Type: "meteor", Target: "x"},
		{Name: "b", Type: "decode_crash", Target: "decode-0", Params: map[string]any{"bogus": 1}},
		{Name: "b", Type: "decode_crash", Target: "decode-0"},
	})
	require.Error(t, err, "NewTimeline accepted bad specs")
	for _, want := range []string{`"meteor"`, "params.bogus", `duplicate fault name "b"`} {
		assert.ErrorContains(t, err, want)
	}
}

func TestTimelineRunAppliesVerifiesReverts(t *testing.T) {
	e := newFakeEnv(t)
	e.withLinks("router->decode-0")
	e.startProc("decode-0", "decode")
	tl, err := NewTimeline([]scenarios.Fault{
		// A partition's proof (dialling is refused) holds from Apply on, so its timed
		// revert cannot overtake it however loaded the machine. A paused process shows
		// state T only once the kernel has run it: that fault is held until the test
		// has seen its proof, so no deadline races the scheduler.
		{Name: "cut", Type: "network_partition", Target: "router->decode-0", At: ms_(0), For: ms_(300)},
		{Name: "freeze", Type: "process_pause", Target: "decode-0", At: ms_(20)},
	}, WithLogger(quietLogger()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, e, time.Now()) }()
	require.Eventually(t, func() bool {
		log := e.eventLog()
		return slices.Contains(log, "fault_stop:cut") && slices.Contains(log, "fault_verified:freeze:true")
	}, waitBound, 5*time.Millisecond, "cut never reverted or freeze never verified")
	cancel()
	require.NoError(t, <-done, "Run")
	// The faults overlap and run on their own schedules: only each fault's own events
	// are ordered.
	events := e.eventLog()
	for _, f := range []string{"cut", "freeze"} {
		want := []string{"fault_start:" + f, "fault_verified:" + f + ":true", "fault_stop:" + f}
		require.Equal(t, want, of(events, f), "%s events", f)
	}
	for _, ev := range e.events {
		if ev.FaultType == "" || ev.Target == "" || ev.Time.IsZero() {
			t.Errorf("event lacks fields: %+v", ev)
		}
		if ev.Type == "fault_verified" && ev.Detail == "" {
			t.Errorf("verified event without evidence: %+v", ev)
		}
	}
	k, _ := e.links.Link("router->decode-0")
	assert.True(t, k.IsUp(), "link still down after the run")
	procState("decode-0", func(st supervisor.State) bool { return !stoppedState(st) }, "running")(t, e)
}

func TestTimelineUnverifiedFailsAndReverts(t *testing.T) {
	e := newFakeEnv(t)
	e.withLinks("router->decode-0")
	tl, err := NewTimeline([]scenarios.Fault{
		{Name: "cut", Type: "network_partition", Target: "router->decode-0", At: ms_(0)}, // held
		{Name: "flood", Type: "queue_saturation", Target: "client", At: ms_(5), For: ms_(1000)},
	}, WithVerifyTimeout(100*time.Millisecond), WithLogger(quietLogger()))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	err = tl.Run(ctx, e, time.Now())
	require.ErrorIs(t, err, ErrNotVerified, "Run")
	assert.ErrorContains(t, err, "flood", "the error names the fault")
	events := e.eventLog()
	for f, want := range map[string][]string{
		"cut":   {"fault_start:cut", "fault_verified:cut:true", "fault_stop:cut"},
		"flood": {"fault_start:flood", "fault_verified:flood:false", "fault_stop:flood"},
	} {
		require.Equal(t, want, of(events, f), "%s events", f)
	}
	// Reverted latest first.
	var starts, stops []string
	for _, ev := range events {
		typ, f, _ := strings.Cut(ev, ":")
		f, _, _ = strings.Cut(f, ":")
		switch typ {
		case "fault_start":
			starts = append(starts, f)
		case "fault_stop":
			stops = append(stops, f)
		}
	}
	slices.Reverse(starts)
	assert.Equal(t, starts, stops, "reverted in the reverse order of the applies")
	assert.True(t, e.lastRun().stopped.Load(), "burst not stopped")
	k, _ := e.links.Link("router->decode-0")
	assert.True(t, k.IsUp(), "held partition not reverted on failure")
}

func TestTimelineApplyFailure(t *testing.T) {
	e := newFakeEnv(t)
	tl, err := NewTimeline([]scenarios.Fault{{Name: "ghost", Type: "decode_crash", Target: "decode-9"}}, WithLogger(quietLogger()))
	require.NoError(t, err)
	err = tl.Run(context.Background(), e, time.Now())
	require.ErrorIs(t, err, ErrApply)
	require.ErrorContains(t, err, "names nothing")
	want := []string{"fault_start:ghost", "fault_verified:ghost:false", "fault_stop:ghost"}
	require.Equal(t, want, e.eventLog(), "events")
}

func TestTimelineCancelRevertsHeldFaults(t *testing.T) {
	e := newFakeEnv(t)
	e.withLinks("prefill-0->decode-0")
	tl, err := NewTimeline([]scenarios.Fault{
		{Name: "cut", Type: "network_partition", Target: "prefill-0->decode-0", At: ms_(0)},
		{Name: "never", Type: "network_partition", Target: "prefill-0->decode-0", At: scenarios.Duration(time.Hour)},
	}, WithLogger(quietLogger()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, e, time.Now()) }()
	// Wait (bounded) until the first fault is verified, then end the run.
	waitFor(t, e.eventLog, "fault_verified:cut:true")
	cancel()
	require.NoError(t, <-done, "Run after cancel")
	want := []string{"fault_start:cut", "fault_verified:cut:true", "fault_stop:cut"}
	require.Equal(t, want, e.eventLog(), "events")
	// RevertAll again is a no-op.
	require.NoError(t, tl.RevertAll(context.Background(), e), "second RevertAll")
	require.Len(t, e.eventLog(), 3, "events after the second RevertAll")
}
