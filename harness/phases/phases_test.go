package phases

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/metricsel"
	"pdsoak/scenarios"
)

// stepClock is a Clock on virtual time: Sleep fires the Every timers due meanwhile, in
// time order (as the simulator's loop does).
type stepClock struct {
	t0, now time.Time
	seq     int
	timers  []*stepTimer
}

type stepTimer struct {
	at   time.Time
	seq  int
	fn   func()
	dead bool
}

func newStepClock() *stepClock {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return &stepClock{t0: t0, now: t0}
}

func (c *stepClock) Now() time.Time { return c.now }

func (c *stepClock) at(t time.Time, fn func()) *stepTimer {
	c.seq++
	tm := &stepTimer{at: t, seq: c.seq, fn: fn}
	c.timers = append(c.timers, tm)
	return tm
}

func (c *stepClock) Sleep(d time.Duration) bool {
	end := c.now.Add(d)
	for {
		sort.SliceStable(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			c.now = end
			return true
		}
		tm := c.timers[0]
		c.timers = c.timers[1:]
		if !tm.dead {
			c.now = tm.at
			tm.fn()
		}
	}
}

func (c *stepClock) Every(d time.Duration, fn func(context.Context)) func() {
	var tm *stepTimer
	var tick func()
	tick = func() { fn(context.Background()); tm = c.at(c.now.Add(d), tick) }
	tm = c.at(c.now.Add(d), tick)
	return func() { tm.dead = true }
}

func (c *stepClock) since() time.Duration { return c.now.Sub(c.t0) }

// gauges answers reads from a script: one value of the leak gauge per read (the last
// one repeats); a negative value is a failed scrape.
type gauges struct {
	script []float64
	reads  []time.Duration
	clk    *stepClock
}

func (g *gauges) read(context.Context) ([]map[string]float64, []error) {
	g.reads = append(g.reads, g.clk.since())
	v := g.script[min(len(g.reads), len(g.script))-1]
	if v < 0 {
		return []map[string]float64{nil}, []error{errors.New("refused")}
	}
	return []map[string]float64{{"sglang:num_running_reqs": v}}, []error{nil}
}

func TestLeakCheck(t *testing.T) {
	tests := []struct {
		name      string
		script    []float64
		bound     time.Duration
		passed    bool
		reads     []time.Duration
		returnsAt time.Duration
	}{
		{"drains on the third read", []float64{2, 1, 0}, 10 * time.Second, true,
			[]time.Duration{0, time.Second, 2 * time.Second}, 2 * time.Second},
		{"never drains: the last pause is cut at the bound", []float64{1}, 2500 * time.Millisecond, false,
			[]time.Duration{0, time.Second, 2 * time.Second}, 2500 * time.Millisecond},
		{"an unanswered read is not a pass", []float64{-1}, 1500 * time.Millisecond, false,
			[]time.Duration{0, time.Second}, 1500 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newStepClock()
			g := &gauges{script: tc.script, clk: clk}
			v := LeakCheck(clk, []string{"decode-0"}, g.read, tc.bound, time.Second)
			assert.Equal(t, tc.passed, v.Passed, v.Detail)
			assert.Equal(t, tc.reads, g.reads)
			assert.Equal(t, tc.returnsAt, clk.since())
		})
	}
	v := LeakCheck(newStepClock(), nil, nil, time.Second, time.Second)
	assert.Equal(t, judge.LeakNoMetrics, v.Detail)
}

func TestSample(t *testing.T) {
	clk := newStepClock()
	g := &gauges{script: []float64{3, -1, 0}, clk: clk}
	var got []string
	var warned []string
	stop := Sample(clk, time.Second, []string{"decode-0"}, g.read, func(ev ledger.Event) {
		got = append(got, fmt.Sprintf("%v %s %v", clk.since(), ev.Source, ev.Metrics["sglang:num_running_reqs"]))
	}, func(p string, err error) { warned = append(warned, p+": "+err.Error()) })
	clk.Sleep(3500 * time.Millisecond)
	stop()
	clk.Sleep(10 * time.Second)
	assert.Equal(t, []string{"1s decode-0 3", "3s decode-0 0"}, got, "a failed read is a gap")
	assert.Equal(t, []string{"decode-0: refused"}, warned)
}

func TestWatchPD(t *testing.T) {
	sel, err := metricsel.Parse("sglang:num_prefill_done_total")
	require.NoError(t, err)
	counters := []scenarios.PDCounter{{Process: "prefill-0", Selector: sel}}
	for _, last := range []bool{true, false} {
		t.Run(fmt.Sprintf("last=%v", last), func(t *testing.T) {
			clk := newStepClock()
			var reads []time.Duration
			stop := WatchPD(clk, counters, func(context.Context) { reads = append(reads, clk.since()) })
			clk.Sleep(1200 * time.Millisecond)
			stop(last)
			stop(true) // idempotent
			clk.Sleep(time.Second)
			want := []time.Duration{0, PDCounterEvery, 2 * PDCounterEvery}
			if last {
				want = append(want, 1200*time.Millisecond)
			}
			assert.Equal(t, want, reads)
		})
	}
	ev := PDCounterEvent(counters[0], 7, nil)
	assert.Equal(t, map[string]float64{"sglang:num_prefill_done_total": 7}, ev.Metrics)
	ev = PDCounterEvent(counters[0], 0, errors.New("down"))
	assert.Equal(t, "down", ev.Error)
	assert.Nil(t, ev.Metrics)
	assert.Empty(t, ev.Cause)
	ev = PDCounterEvent(counters[0], 0, fmt.Errorf("%w: prefill-0 does not export x", ErrCounterAbsent))
	assert.Equal(t, ledger.PDCounterAbsent, ev.Cause, "a process without the series is told apart from one that cannot be read")
	assert.Nil(t, ev.Metrics)
}

func TestDrain(t *testing.T) {
	for _, tc := range []struct {
		name        string
		doneAfter   time.Duration
		interrupted bool
		cancelled   bool
		drained     bool
	}{
		{"done within the bound", 3 * time.Second, false, false, true},
		{"past the bound: cancelled, then waited for", time.Minute, false, true, false},
		{"interrupted: the brief bound", 5 * time.Second, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newStepClock()
			cancelled := false
			wait := func(d time.Duration) bool {
				if cancelled || clk.since()+d >= tc.doneAfter {
					clk.Sleep(min(d, max(tc.doneAfter-clk.since(), 0)))
					return true
				}
				clk.Sleep(d)
				return false
			}
			ev := Drain(clk, 10*time.Second, 2*time.Second, time.Second, tc.interrupted, wait, func() int { return 4 }, func() { cancelled = true })
			assert.Equal(t, tc.cancelled, cancelled)
			want := judge.DrainEvent(tc.drained, 4, clk.since(), judge.DrainBound(10*time.Second, 2*time.Second, tc.interrupted), tc.interrupted)
			assert.Equal(t, want, ev)
		})
	}
}

func TestProber(t *testing.T) {
	var evs []string
	p := NewProber([]string{"router", "decode-0"}, []string{"u0", "u1"}, func(ev ledger.Event) { evs = append(evs, string(ev.Type)+" "+ev.Source) })
	var changes int
	p.OnChange = func(ledger.Event) { changes++ }
	for _, ok := range []bool{false, true, false, false, false} {
		p.Observe(1, ok)
	}
	p.Observe(0, true)
	assert.Equal(t, []string{"target_down decode-0"}, evs, "two failures in a row")
	assert.True(t, p.Down(1))
	assert.Equal(t, 1, changes)

	// The last tries: every source is asked once, then decode-0 again: it answers on the
	// second, judge.LivenessFinalGap later.
	clk := newStepClock()
	var tries []string
	answers := []bool{false, true}
	p.FinalTries(clk, func(down []int) {
		tries = append(tries, fmt.Sprintf("%v %v", clk.since(), down))
		p.Observe(1, answers[0])
		answers = answers[1:]
	})
	assert.Equal(t, []string{"0s [0 1]", judge.LivenessFinalGap.String() + " [1]"}, tries)
	assert.Equal(t, []string{"target_down decode-0", "target_up decode-0"}, evs)

	// A source that never answers gets exactly judge.LivenessFinalTries.
	p.Observe(0, false)
	p.Observe(0, false)
	n := 0
	p.FinalTries(newStepClock(), func([]int) { n++; p.Observe(0, false) })
	assert.Equal(t, judge.LivenessFinalTries, n)

	// A source that died after its last periodic probe, which it passed, is asked too and
	// found down; the healthy one is asked once.
	evs = nil
	q := NewProber([]string{"router", "decode-0"}, []string{"u0", "u1"}, func(ev ledger.Event) { evs = append(evs, string(ev.Type)+" "+ev.Source) })
	q.Observe(0, true)
	q.Observe(1, true)
	tries = nil
	q.FinalTries(newStepClock(), func(due []int) {
		tries = append(tries, fmt.Sprint(due))
		for _, i := range due {
			q.Observe(i, i == 0)
		}
	})
	assert.Equal(t, []string{"[0 1]", "[1]", "[1]"}, tries)
	assert.Equal(t, []string{"target_down decode-0"}, evs)
}
