package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"

	"pdsoak/harness/client"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
)

// The workloads on the virtual clock. Each builds its requests with harness/workload's
// own functions (same ids, prompts, max_tokens and sampling as a real run) and keeps its
// schedule with Loop timers instead of goroutines and sleeps. r.active counts the
// workload units (agent sessions, open-loop schedules, bursts, probe series) still
// running; a unit ends only once its requests have resolved, as a real workload's Run
// returns only then.

// startLoad starts every workload at t0 and returns the end of the load window.
func (r *runner) startLoad() time.Time {
	sc := r.sc
	r.emit(ledger.Event{Type: ledger.EventLog,
		Message: fmt.Sprintf("load started: %d workloads for %v", len(r.workloads), sc.Duration)})
	r.startFaults()
	for i, w := range r.workloads {
		noLag := sc.Workloads[i].MaxInFlight > 0
		switch w := w.(type) {
		case *workload.Agents:
			r.startAgents(w)
		case *workload.OpenLoop:
			r.startOpenLoop(w, noLag)
		case *workload.Burst:
			r.startBurst(w)
		case *workload.Probe:
			r.startProbe(w)
		case *workload.Trace:
			r.startTrace(w)
		}
	}
	return r.t0.Add(sc.Duration.D())
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
	if r.interrupted != nil {
		return false
	}
	at := r.loop.Now().Add(max(d, 0))
	if d <= 0 {
		if !r.loop.Now().Before(until) {
			return false
		}
		fn()
		return true
	}
	if !at.Before(until) {
		return false
	}
	r.loop.At(at, fn)
	return true
}

// session is one agent: its conversations, turn after turn, each turn sent only once
// the previous one resolved.
type session struct {
	r      *runner
	a      *workload.Agents
	budget *rate.Limiter
	idx    int
	until  time.Time

	rng     *rand.Rand
	system  string
	round   int
	prefix  string
	conv    []client.Message
	turn    int
	id      string
	attempt int
	back    workload.Reconnects // the turn's back-off after lost connections
}

func (r *runner) startAgents(a *workload.Agents) {
	from, until := r.window(&a.Common)
	n := max(a.Spec.Agents, 1)
	budget := workload.RetryBudget(n)
	for i := 1; i <= n; i++ {
		s := &session{r: r, a: a, budget: budget, idx: i, until: until}
		r.active++
		r.loop.At(from, func() {
			if r.interrupted != nil || !r.loop.Now().Before(until) {
				s.end()
				return
			}
			s.rng, s.system = a.NewSession(s.idx)
			s.conversation()
		})
	}
}

func (s *session) end() { s.r.active-- }

// conversation starts the session's next conversation.
func (s *session) conversation() {
	s.round++
	s.prefix, s.conv = s.a.NewConversation(s.rng, s.system, s.idx, s.round)
	s.turn = 1
	s.sendTurn()
}

// sendTurn sends the current turn, or ends the conversation (and restarts or ends the
// session) after its last.
func (s *session) sendTurn() {
	r, a := s.r, s.a
	if a.Spec.Turns != 0 && s.turn > a.Spec.Turns {
		// The conversation reached its turn limit.
		if !a.Spec.Restart || r.interrupted != nil || !r.loop.Now().Before(s.until) {
			s.end()
			return
		}
		s.conversation()
		return
	}
	if r.interrupted != nil || !r.loop.Now().Before(s.until) {
		s.end()
		return
	}
	s.id = workload.TurnID(s.prefix, s.turn)
	s.attempt = 0
	s.back = workload.Reconnects{}
	r.send(s.req(s.id), false, false, nil, s.result)
}

func (s *session) req(id string) *workload.Req {
	q := s.a.Turn(id, s.idx, s.turn, s.conv)
	q.Scheduled = s.r.loop.Now()
	return q
}

// result handles a turn's result: a refusal is retried after Retry-After and the retry
// budget (as workload.Agents.retry), a lost connection is re-sent after the back-off
// (workload.Reconnects, as workload.Agents.reconnect), anything else is the turn's answer.
func (s *session) result(res *client.Result) {
	r, a := s.r, s.a
	s.attempt++
	if res.Outcome == ledger.OutcomeCancelled && (r.interrupted != nil || !r.loop.Now().Before(s.until)) {
		s.end()
		return
	}
	if s.back.Active() || res.Outcome != ledger.OutcomeRejected {
		wait, id, again := s.back.After(s.id, res.Outcome)
		if !again {
			s.answered(res)
			return
		}
		if !r.wake(s.until, wait, func() { r.send(s.req(id), false, false, nil, s.result) }) {
			s.end()
		}
		return
	}
	wait := workload.RetryAfter(res.RetryAfter)
	if s.attempt > a.Spec.Retries {
		// No retry left: still honour Retry-After before the next turn.
		if !r.wake(s.until, wait, func() { s.answered(res) }) {
			s.end()
		}
		return
	}
	now := r.loop.Now()
	rv := s.budget.ReserveN(now, 1)
	if d := rv.DelayFrom(now); d > workload.MaxRetryBudgetWait {
		rv.CancelAt(now)
		if !r.wake(s.until, wait, func() { s.answered(res) }) {
			s.end()
		}
		return
	}
	wait = max(wait, rv.DelayFrom(now))
	id := workload.RetryID(s.id, s.attempt)
	if !r.wake(s.until, wait, func() { r.send(s.req(id), false, false, nil, s.result) }) {
		rv.CancelAt(r.loop.Now())
		s.end()
	}
}

// answered appends the turn's answer, waits the tool's latency, appends its result,
// thinks, and goes on to the next turn.
func (s *session) answered(res *client.Result) {
	r, a := s.r, s.a
	s.conv = workload.Reply(s.conv, res, s.turn)
	ok := r.wake(s.until, a.Spec.ToolLatency.D(), func() {
		s.conv = a.ToolResult(s.rng, s.conv, s.turn)
		if !r.wake(s.until, a.Spec.ThinkTime.D(), func() { s.turn++; s.sendTurn() }) {
			s.end()
		}
	})
	if !ok {
		s.end()
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
	st := &openLoop{r: r, o: o, noLag: noLag, left: len(sched), stopAt: until.Add(workload.StopGrace)}
	for i, off := range sched {
		at := from.Add(off)
		seq := uint64(i)
		r.loop.At(at, func() { st.due(seq, at) })
	}
}

type openLoop struct {
	r        *runner
	o        *workload.OpenLoop
	noLag    bool
	left     int // hits not resolved (or dropped) yet
	inflight int
	queue    []hit // due hits waiting for a worker (max_in_flight)
	stopAt   time.Time
	ended    bool
}

type hit struct {
	seq uint64
	at  time.Time
}

func (st *openLoop) due(seq uint64, at time.Time) {
	if st.r.interrupted != nil {
		st.drop(1)
		return
	}
	if m := st.o.Spec.MaxInFlight; m > 0 && st.inflight >= m {
		st.queue = append(st.queue, hit{seq, at})
		return
	}
	st.fire(hit{seq, at})
}

func (st *openLoop) fire(h hit) {
	st.inflight++
	st.r.send(st.o.Single(h.seq, h.at), false, st.noLag, nil, func(*client.Result) {
		st.inflight--
		st.drop(1)
		// A worker is free: the oldest waiting hit goes, unless the attack was stopped.
		for len(st.queue) > 0 && st.inflight < max(st.o.Spec.MaxInFlight, 1) {
			h := st.queue[0]
			st.queue = st.queue[1:]
			if st.r.interrupted != nil || st.r.loop.Now().After(st.stopAt) {
				st.drop(1)
				continue
			}
			st.fire(h)
		}
	})
}

func (st *openLoop) drop(n int) {
	st.left -= n
	if st.left == 0 && !st.ended {
		st.ended = true
		st.r.active--
	}
}

// startBurst sends Count requests at once at the start of the window.
func (r *runner) startBurst(b *workload.Burst) {
	from, _ := r.window(&b.Common)
	n := b.Spec.Count
	if n <= 0 {
		n = workload.DefaultBurstCount
	}
	r.active++
	left := n
	r.loop.At(from, func() {
		if r.interrupted != nil {
			r.active--
			return
		}
		for i := 0; i < n; i++ {
			r.send(b.Single(uint64(i), from), false, false, nil, func(*client.Result) {
				left--
				if left == 0 {
					r.active--
				}
			})
		}
	})
}

// startProbe sends the probe prompts once per interval, each round once the previous
// one has resolved (as workload.Probe).
func (r *runner) startProbe(p *workload.Probe) {
	from, to := r.window(&p.Common)
	n, every := max(p.Spec.Count, 1), p.Spec.Interval.D()
	if every <= 0 {
		every = time.Second
	}
	r.active++
	var round func(k int)
	round = func(k int) {
		at := from.Add(time.Duration(k) * every)
		if !at.Before(to) || r.interrupted != nil {
			r.active--
			return
		}
		r.loop.At(at, func() {
			left := n
			for i := 0; i < n; i++ {
				r.send(p.ProbeRequest(i, k, at), false, false, nil, func(*client.Result) {
					left--
					if left == 0 {
						round(k + 1)
					}
				})
			}
		})
	}
	round(0)
}
