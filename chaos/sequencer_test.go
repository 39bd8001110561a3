package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// virtualRT is a Runtime on a virtual clock, stepped by the test: timers fire in time
// order (ties in the order they were set), and with async set a call's answer comes
// as its own step at the same instant, after the steps already due (as a goroutine's
// answer would), instead of before Do returns.
type virtualRT struct {
	t0      time.Time
	now     time.Time
	seq     int
	timers  []*vtimer
	async   bool
	calls   []string
	events  []string
	details map[string]string
}

type vtimer struct {
	at   time.Time
	seq  int
	fn   func()
	dead bool
}

func newVirtualRT() *virtualRT {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return &virtualRT{t0: t0, now: t0, details: map[string]string{}}
}

func (v *virtualRT) Now() time.Time   { return v.now }
func (v *virtualRT) Stamp() time.Time { return v.now }
func (v *virtualRT) Cancel()          { v.calls = append(v.calls, "cancel") }

func (v *virtualRT) Emit(ev ledger.Event) {
	e := fmt.Sprintf("%v %s:%s", ev.Time.Sub(v.t0), ev.Type, ev.Fault)
	if ev.Passed != nil {
		e += fmt.Sprintf(":%v", *ev.Passed)
		v.details[ev.Fault] = ev.Detail
	}
	v.events = append(v.events, e)
}

func (v *virtualRT) At(t time.Time, fn func()) func() {
	v.seq++
	tm := &vtimer{at: t, seq: v.seq, fn: fn}
	v.timers = append(v.timers, tm)
	return func() { tm.dead = true }
}

func (v *virtualRT) Do(op Op, done func(error)) {
	kind := map[OpKind]string{OpApply: "apply", OpVerify: "verify", OpRevert: "revert"}[op.Kind]
	v.calls = append(v.calls, fmt.Sprintf("%v %s:%s", v.now.Sub(v.t0), kind, op.Fault.(*pollFault).name))
	err := op.Call(context.Background(), nil)
	if f := op.Fault.(*pollFault); op.Kind == OpApply && f.applyFor > 0 {
		v.At(v.now.Add(f.applyFor), func() { done(err) }) // a slow Apply (a restart's health wait)
		return
	}
	if v.async {
		v.At(v.now, func() { done(err) })
		return
	}
	done(err)
}

// run fires every timer due by until, in order.
func (v *virtualRT) run(until time.Duration) {
	for {
		sort.SliceStable(v.timers, func(i, j int) bool {
			if !v.timers[i].at.Equal(v.timers[j].at) {
				return v.timers[i].at.Before(v.timers[j].at)
			}
			return v.timers[i].seq < v.timers[j].seq
		})
		if len(v.timers) == 0 || v.timers[0].at.After(v.t0.Add(until)) {
			v.now = v.t0.Add(until)
			return
		}
		tm := v.timers[0]
		v.timers = v.timers[1:]
		if !tm.dead {
			v.now = tm.at
			tm.fn()
		}
	}
}

// pollFault proves itself on its proveOn-th Verify (0: never).
type pollFault struct {
	name      string
	proveOn   int
	polls     int
	applyErr  error
	revertErr error
	applyFor  time.Duration // Apply answers this long after it was called
}

func (f *pollFault) Apply(context.Context, Env) error { return f.applyErr }
func (f *pollFault) Verify(context.Context, Env) error {
	f.polls++
	if f.proveOn > 0 && f.polls >= f.proveOn {
		return nil
	}
	return errors.New("no proof yet")
}
func (f *pollFault) Revert(context.Context, Env) error { return f.revertErr }
func (f *pollFault) Evidence() string                  { return fmt.Sprintf("proved on poll %d", f.polls) }

func d(s string) scenarios.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return scenarios.Duration(v)
}

// sequencer builds a Sequencer over faults named after specs.
func sequencer(rt *virtualRT, timeout time.Duration, specs []scenarios.Fault, faults ...*pollFault) *Sequencer {
	fs := make([]Fault, len(faults))
	for i, f := range faults {
		fs[i] = f
		specs[i].Name, specs[i].Type, specs[i].Target = f.name, "decode_crash", "decode-0"
	}
	return NewSequencer(specs, fs, rt, timeout, nil)
}

func TestSequencer(t *testing.T) {
	for _, async := range []bool{false, true} {
		mode := map[bool]string{false: "calls answer at once (sim)", true: "calls answer later (goroutines)"}[async]
		t.Run(mode, func(t *testing.T) {
			t.Run("verify polls back off until the proof, then the revert is on time", func(t *testing.T) {
				rt := newVirtualRT()
				rt.async = async
				s := sequencer(rt, 10*time.Second, []scenarios.Fault{{At: d("1s"), For: d("2s")}}, &pollFault{name: "a", proveOn: 4})
				s.Start(rt.t0)
				rt.run(time.Hour)
				require.True(t, s.Finished())
				require.NoError(t, s.Err())
				// Polls at 1s, +20ms, +40ms, +80ms: proved at 1.14s.
				assert.Equal(t, []string{"1s apply:a", "1s verify:a", "1.02s verify:a", "1.06s verify:a", "1.14s verify:a", "3s revert:a"}, rt.calls)
				assert.Equal(t, []string{"1s fault_start:a", "1.14s fault_verified:a:true", "3s fault_stop:a"}, rt.events)
				assert.Equal(t, "proved on poll 4", rt.details["a"])
			})
			t.Run("no proof before its revert: not verified, reverted, the run failed", func(t *testing.T) {
				rt := newVirtualRT()
				rt.async = async
				s := sequencer(rt, time.Hour, []scenarios.Fault{{At: d("0s"), For: d("100ms")}, {At: d("0s")}},
					&pollFault{name: "never"}, &pollFault{name: "held", proveOn: 1})
				s.Start(rt.t0)
				rt.run(time.Hour)
				require.True(t, s.Finished())
				err := s.Err()
				require.ErrorIs(t, err, ErrNotVerified)
				assert.Contains(t, err.Error(), "before its revert at 100ms")
				assert.Equal(t, []string{"0s fault_start:never", "0s fault_start:held", "0s fault_verified:held:true",
					"100ms fault_verified:never:false", "100ms fault_stop:held", "100ms fault_stop:never"}, rt.events, "reverted latest first")
				assert.Equal(t, "no proof before its revert at 100ms", rt.details["never"])
			})
			t.Run("a failed apply stops the timeline and is reverted", func(t *testing.T) {
				rt := newVirtualRT()
				rt.async = async
				s := sequencer(rt, time.Second, []scenarios.Fault{{At: d("0s")}, {At: d("1s"), For: d("1s")}, {At: d("5s")}},
					&pollFault{name: "held", proveOn: 1}, &pollFault{name: "broken", applyErr: errors.New("refused")}, &pollFault{name: "later", proveOn: 1})
				s.Start(rt.t0)
				rt.run(time.Hour)
				require.True(t, s.Finished())
				require.ErrorIs(t, s.Err(), ErrApply)
				assert.Equal(t, []string{"0s fault_start:held", "0s fault_verified:held:true", "1s fault_start:broken",
					"1s fault_verified:broken:false", "1s fault_stop:broken", "1s fault_stop:held"}, rt.events, "later never applied")
				assert.Contains(t, rt.calls, "cancel")
			})
			t.Run("stopped while verifying: no proof before the run ended; held faults reverted", func(t *testing.T) {
				rt := newVirtualRT()
				rt.async = async
				s := sequencer(rt, time.Hour, []scenarios.Fault{{At: d("0s")}, {At: d("1s")}},
					&pollFault{name: "held", proveOn: 1}, &pollFault{name: "slow"})
				s.Start(rt.t0)
				rt.run(2 * time.Second)
				require.False(t, s.Finished(), "held faults wait for the end of the run")
				s.Stop()
				rt.run(time.Hour)
				require.True(t, s.Finished())
				require.ErrorIs(t, s.Err(), ErrNotVerified)
				assert.Equal(t, "no proof before the run ended", rt.details["slow"])
				assert.Equal(t, []string{"2s fault_stop:slow", "2s fault_stop:held"}, rt.events[len(rt.events)-2:])
				assert.NotContains(t, rt.calls, "cancel", "an ended run is not an abort")
			})
			t.Run("stopped while applying: the apply cut short is the stop's, as a proof cut short", func(t *testing.T) {
				rt := newVirtualRT()
				rt.async = async
				s := sequencer(rt, time.Hour, []scenarios.Fault{{At: d("0s")}},
					&pollFault{name: "restart", applyFor: 5 * time.Second, applyErr: fmt.Errorf("health wait: %w", context.Canceled)})
				s.Start(rt.t0)
				rt.run(time.Second)
				s.Stop()
				rt.run(time.Hour)
				require.True(t, s.Finished())
				assert.Equal(t, ledger.ProofCutAtStop, rt.details["restart"])
			})
			t.Run("same instant: a revert's call returns before the apply due with it starts", func(t *testing.T) {
				rt := newVirtualRT()
				rt.async = async
				s := sequencer(rt, time.Second, []scenarios.Fault{{At: d("0s"), For: d("1s")}, {At: d("1s"), For: d("1s")}},
					&pollFault{name: "first", proveOn: 1}, &pollFault{name: "second", proveOn: 1})
				s.Start(rt.t0)
				rt.run(time.Hour)
				require.NoError(t, s.Err())
				var order []string
				for _, c := range rt.calls {
					if !strings.Contains(c, "verify") {
						order = append(order, c)
					}
				}
				assert.Equal(t, []string{"0s apply:first", "1s revert:first", "1s apply:second", "2s revert:second"}, order)
			})
			t.Run("a failed revert is an error of its own", func(t *testing.T) {
				rt := newVirtualRT()
				rt.async = async
				s := sequencer(rt, time.Second, []scenarios.Fault{{At: d("0s"), For: d("1s")}},
					&pollFault{name: "stuck", proveOn: 1, revertErr: errors.New("proxy gone")})
				s.Start(rt.t0)
				rt.run(time.Hour)
				require.True(t, s.Finished())
				require.ErrorContains(t, s.Err(), "chaos: revert stuck: proxy gone")
			})
		})
	}
}
