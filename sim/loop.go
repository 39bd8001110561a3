package sim

import (
	"container/heap"
	"context"
	"time"
)

// Epoch is virtual time zero. Ledger timestamps are Epoch plus virtual time, so a
// simulated run's ledger does not depend on when it ran.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Loop is the virtual clock and its event queue: a min-heap of timed callbacks. Events
// at the same instant run in the order they were scheduled (a sequence number breaks
// ties), which is what makes a run reproducible. A Loop is not safe for concurrent use:
// the simulation is one goroutine.
type Loop struct {
	now   time.Time
	seq   uint64
	q     eventHeap
	steps uint64
}

// Timer is a scheduled callback; Stop cancels it.
type Timer struct {
	at    time.Time
	seq   uint64
	fn    func()
	index int // position in the heap; -1 once fired or stopped
}

// NewLoop returns a loop whose clock reads start.
func NewLoop(start time.Time) *Loop { return &Loop{now: start} }

// Now is the virtual time.
func (l *Loop) Now() time.Time { return l.now }

// Steps is how many events have run (a cost measure for benchmarks).
func (l *Loop) Steps() uint64 { return l.steps }

// At schedules fn at t; a t in the past runs at the current instant, after the events
// already scheduled for it.
func (l *Loop) At(t time.Time, fn func()) *Timer {
	if t.Before(l.now) {
		t = l.now
	}
	l.seq++
	tm := &Timer{at: t, seq: l.seq, fn: fn}
	heap.Push(&l.q, tm)
	return tm
}

// After schedules fn d after now.
func (l *Loop) After(d time.Duration, fn func()) *Timer { return l.At(l.now.Add(d), fn) }

// Stop cancels t; it reports whether t was still pending. A nil timer is allowed.
func (l *Loop) Stop(t *Timer) bool {
	if t == nil || t.index < 0 {
		return false
	}
	heap.Remove(&l.q, t.index)
	return true
}

// Pending reports whether t is scheduled and has not run.
func (t *Timer) Pending() bool { return t != nil && t.index >= 0 }

// Next is the time of the earliest pending event; ok is false when none is pending.
func (l *Loop) Next() (t time.Time, ok bool) {
	if len(l.q) == 0 {
		return time.Time{}, false
	}
	return l.q[0].at, true
}

// Step runs the earliest pending event, advancing the clock to its time. It reports
// false when nothing was pending.
func (l *Loop) Step() bool {
	if len(l.q) == 0 {
		return false
	}
	tm := heap.Pop(&l.q).(*Timer)
	l.now = tm.at
	l.steps++
	tm.fn()
	return true
}

// RunUntil runs every event due at or before end, in order, then sets the clock to end
// (if it is not already later). Events scheduled while running are run too when due.
func (l *Loop) RunUntil(end time.Time) {
	for len(l.q) > 0 && !l.q[0].at.After(end) {
		l.Step()
	}
	if end.After(l.now) {
		l.now = end
	}
}

// RunWhile runs events in order while cond() holds and events are pending, never
// past end. It returns when cond() is false, the queue is empty, or the next event is
// after end (the clock then reads end).
func (l *Loop) RunWhile(end time.Time, cond func() bool) {
	for cond() {
		if len(l.q) == 0 || l.q[0].at.After(end) {
			if end.After(l.now) {
				l.now = end
			}
			return
		}
		l.Step()
	}
}

type eventHeap []*Timer

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *eventHeap) Push(x any) {
	t := x.(*Timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *eventHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.index = -1
	*h = old[:n-1]
	return t
}

// Sleep runs the loop for d (phases.Clock: the run's phases wait on the virtual clock).
func (l *Loop) Sleep(d time.Duration) bool {
	l.RunUntil(l.now.Add(d))
	return true
}

// Every calls fn every d from now until stop (phases.Clock).
func (l *Loop) Every(d time.Duration, fn func(context.Context)) (stop func()) {
	stopped := false
	var tm *Timer
	var tick func()
	tick = func() {
		if !stopped {
			fn(context.Background())
			tm = l.After(d, tick)
		}
	}
	tm = l.After(d, tick)
	return func() { stopped = true; l.Stop(tm) }
}
