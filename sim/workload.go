package sim

import (
	"time"

	"pdsoak/harness/client"
	"pdsoak/harness/phases"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
)

// The workloads on the virtual clock. harness/workload decides what each sends and
// when (Session, Schedule, Burst.Requests, Probe.Round, Trace.Arrivals), as it does for
// the real drivers; here Loop timers replace their goroutines and sleeps. r.active
// counts the workload units (agent sessions, open-loop schedules, bursts, probe series,
// traces) still running; a unit ends only once its requests have resolved, as a real
// workload's Run returns only then.

// openLoad opens the load window at t0 (now).
func (r *runner) openLoad() {
	r.t0 = r.loop.Now()
	r.emit(phases.LoadStartedEvent(r.t0, len(r.workloads), r.sc.Duration.D()))
}

// startWorkloads starts every workload at t0.
func (r *runner) startWorkloads() {
	sc := r.sc
	for i, w := range r.workloads {
		switch w := w.(type) {
		case *workload.Agents:
			r.startAgents(w)
		case *workload.OpenLoop:
			r.startOpenLoop(w, sc.Workloads[i].MaxInFlight > 0)
		case *workload.Burst:
			from, _ := r.window(&w.Common)
			r.active++
			r.loop.At(from, func() { r.batch(w.Requests(from), func() { r.active-- }) })
		case *workload.Probe:
			from, to := r.window(&w.Common)
			r.active++
			r.probeRound(w, from, to, 0)
		case *workload.Trace:
			r.startTrace(w)
		}
	}
}

// window is the workload's absolute window on the virtual clock.
func (r *runner) window(c *workload.Common) (time.Time, time.Time) {
	from := r.t0.Add(c.Spec.Start.D())
	return from, from.Add(c.Spec.Duration.D())
}

// wake runs fn after d unless the window ends first (a real workload's sleep on its
// window's context): it reports false, and fn is not run, when the window is over by
// then. d <= 0 runs fn now when the window is still open.
func (r *runner) wake(until time.Time, d time.Duration, fn func()) bool {
	at := r.loop.Now().Add(max(d, 0))
	if r.interrupted != nil || !at.Before(until) {
		return false
	}
	if d <= 0 {
		fn()
	} else {
		r.loop.At(at, fn)
	}
	return true
}

// batch sends reqs at once (none when the run was interrupted) and calls then once
// every one has resolved.
func (r *runner) batch(reqs []*workload.Req, then func()) {
	if r.interrupted != nil {
		reqs = nil
	}
	left := len(reqs)
	if left == 0 {
		then()
	}
	for _, q := range reqs {
		r.send(q, false, func(*client.Result) {
			if left--; left == 0 {
				then()
			}
		})
	}
}

// startAgents starts every session of a at the start of its window.
func (r *runner) startAgents(a *workload.Agents) {
	from, until := r.window(&a.Common)
	for _, s := range a.Sessions() {
		r.active++
		r.loop.At(from, func() { r.agent(s, until, s.Start()) })
	}
}

// agent carries out a session's step (workload.Session): the wait, then the send or the
// end; the send's result decides the next step.
func (r *runner) agent(s *workload.Session, until time.Time, st workload.Step) {
	ok := r.wake(until, st.Wait, func() {
		if st.End {
			r.active--
			return
		}
		r.send(s.Req(r.loop.Now()), false, func(res *client.Result) {
			now := r.loop.Now()
			r.agent(s, until, s.Result(now, res, r.interrupted != nil || !now.Before(until)))
		})
	})
	if !ok {
		s.Stop(r.loop.Now())
		r.active--
	}
}

// probeRound sends probe round k at its time, and the next once it resolved.
func (r *runner) probeRound(p *workload.Probe, from, to time.Time, k int) {
	at, reqs, ok := p.Round(from, to, k)
	if !ok || r.interrupted != nil {
		r.active--
		return
	}
	r.loop.At(at, func() { r.batch(reqs, func() { r.probeRound(p, from, to, k+1) }) })
}

// startTrace sends each request of a trace's schedule at its arrival.
func (r *runner) startTrace(t *workload.Trace) {
	from, _ := r.window(&t.Common)
	arr := t.Arrivals()
	if len(arr) == 0 {
		return
	}
	r.active++
	left := len(arr)
	for _, a := range arr {
		at := from.Add(a.At)
		r.loop.At(at, func() {
			r.batch([]*workload.Req{t.Request(a.K, at)}, func() {
				if left--; left == 0 {
					r.active--
				}
			})
		})
	}
}

// startOpenLoop sends the pacer's schedule (workload.Schedule, the schedule a real run's
// attacker replays), at most max_in_flight at once when set.
func (r *runner) startOpenLoop(o *workload.OpenLoop, noLag bool) {
	from, until := r.window(&o.Common)
	sched := workload.Schedule(o.Pacer, o.Spec.Duration.D(), o.Spec.Count)
	if len(sched) == 0 {
		return
	}
	r.active++
	st := &openLoop{r: r, o: o, noLag: noLag, left: len(sched), scheduled: len(sched), stopAt: until.Add(workload.StopGrace)}
	for i, off := range sched {
		at := from.Add(off)
		r.loop.At(at, func() { st.due(hit{uint64(i), at}) })
	}
}

// openLoop models the attacker's workers: a due hit goes at once, or, with all
// max_in_flight workers busy, waits for one (dropped once the attack is stopped).
type openLoop struct {
	r         *runner
	o         *workload.OpenLoop
	noLag     bool
	left      int // hits not resolved (or dropped) yet
	scheduled int // hits in the schedule
	sent      int // hits fired
	inflight  int
	queue     []hit // due hits waiting for a worker (max_in_flight)
	stopAt    time.Time
}

type hit struct {
	seq uint64
	at  time.Time
}

func (st *openLoop) due(h hit) {
	switch {
	case st.r.interrupted != nil:
		st.drop()
	case st.o.Spec.MaxInFlight > 0 && st.inflight >= st.o.Spec.MaxInFlight:
		st.queue = append(st.queue, h)
	default:
		st.fire(h)
	}
}

func (st *openLoop) fire(h hit) {
	st.inflight++
	st.sent++
	st.r.send(st.o.Single(h.seq, h.at), st.noLag, func(*client.Result) {
		st.inflight--
		st.drop()
		// A worker is free: the oldest waiting hit goes, unless the attack was stopped.
		for len(st.queue) > 0 && st.inflight < max(st.o.Spec.MaxInFlight, 1) {
			h := st.queue[0]
			st.queue = st.queue[1:]
			if st.r.interrupted != nil || st.r.loop.Now().After(st.stopAt) {
				st.drop()
				continue
			}
			st.fire(h)
		}
	})
}

func (st *openLoop) drop() {
	if st.left--; st.left == 0 {
		st.r.active--
		if n := st.o.UnsentNote(workload.Stats{Requests: st.sent, Scheduled: st.scheduled, Stopped: st.r.interrupted}); n != "" {
			st.r.emit(ledger.Event{Type: ledger.EventNote, Message: n})
		}
	}
}
