package workload

import (
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"

	"pdsoak/harness/client"
	"pdsoak/ledger"
)

// Session is one agent of an Agents workload as a state machine: its conversations,
// turn after turn, a refused turn re-sent after Retry-After and the retry budget, a
// lost connection re-sent after the back-off (Reconnects). It decides and never waits:
// a driver does the IO. The real one (Agents.Run) is a goroutine that sleeps and sends;
// the simulator's is its event loop. Both run the same loop:
//
//	for st := s.Start(); ; st = s.Result(now, res, windowOver) {
//		// sleep st.Wait; when the window ends first: s.Stop(now); break
//		if st.End || the window is over { break }
//		res = send(s.Req(now))
//	}
//
// so both send the same ids, bodies and waits.
type Session struct {
	a      *Agents
	budget *rate.Limiter
	idx    int

	rng     *rand.Rand
	system  string
	round   int
	prefix  string
	conv    []client.Message
	turn    int
	id      string // the turn's first request id
	next    string // the id of the request Req builds
	attempt int
	back    Reconnects
	rv      *rate.Reservation // the retry budget held for the next send (nil: none)
}

// Step is what a Session's driver does next: wait Wait, then send Req's request, or,
// when End is set, nothing more (the session is over). A wait the window's end cuts
// short ends the session too; the driver then calls Stop. A session whose last
// conversation ended still waits its tool latency and think time, as an agent would.
type Step struct {
	Wait time.Duration
	End  bool
}

// Sessions are the workload's sessions (this shard's), agents 1..N, their re-sends
// drawing on one retry budget (RetryBudget, or WithRetryBudget's).
func (a *Agents) Sessions() []*Session {
	n := max(a.Spec.Agents, 1)
	if a.budget == nil {
		a.budget = RetryBudget(max(a.Shard.size(n), 1))
	}
	var out []*Session
	for i := 0; i < n; i++ {
		if a.Shard.owns(uint64(i)) { // else another shard's session
			out = append(out, &Session{a: a, budget: a.budget, idx: i + 1})
		}
	}
	return out
}

// Start begins the session's first conversation: its first turn is sent now.
func (s *Session) Start() Step {
	s.rng, s.system = s.a.NewSession(s.idx)
	s.conversation()
	return Step{}
}

// conversation starts the next conversation and its first turn.
func (s *Session) conversation() {
	s.round++
	s.prefix, s.conv = s.a.NewConversation(s.rng, s.system, s.idx, s.round)
	s.turn = 0
	s.nextTurn()
}

func (s *Session) nextTurn() {
	s.turn++
	s.id = TurnID(s.prefix, s.turn)
	s.next, s.attempt, s.back = s.id, 0, Reconnects{}
}

// Req builds the request the last Step asked for, scheduled at now.
func (s *Session) Req(now time.Time) *Req {
	s.rv = nil // sent: the budget it held is spent
	q := s.a.Turn(s.next, s.idx, s.turn, s.conv)
	q.Scheduled = now
	return q
}

// Stop ends the session early (the window's end cut a wait short): a retry that will
// not be sent gives its budget back.
func (s *Session) Stop(now time.Time) {
	if s.rv != nil {
		s.rv.CancelAt(now)
		s.rv = nil
	}
}

// Result takes the result of the request Req built; over says the window is over (or
// the run interrupted). A refusal is retried after Retry-After and the retry budget, up
// to Retries times, each re-send under its own id; a lost connection is re-sent after
// the back-off until an answer comes; anything else is the turn's answer, and the next
// turn follows the tool's latency and the think time.
func (s *Session) Result(now time.Time, res *client.Result, over bool) Step {
	s.attempt++
	if res.Outcome == ledger.OutcomeCancelled && over {
		return Step{End: true}
	}
	if s.back.Active() || res.Outcome != ledger.OutcomeRejected {
		wait, id, again := s.back.After(s.id, res.Outcome)
		if !again {
			return s.answered(res, 0)
		}
		s.next = id
		return Step{Wait: wait}
	}
	wait := RetryAfter(res.RetryAfter)
	if s.attempt > s.a.Spec.Retries {
		// No retry left: still honour Retry-After before the next turn.
		return s.answered(res, wait)
	}
	rv := s.budget.ReserveN(now, 1)
	if d := rv.DelayFrom(now); d > MaxRetryBudgetWait {
		// The budget is spent for longer than a retry may wait: give up on this turn
		// rather than join a retry storm.
		rv.CancelAt(now)
		return s.answered(res, wait)
	}
	s.rv = rv
	s.next = RetryID(s.id, s.attempt)
	return Step{Wait: max(wait, rv.DelayFrom(now))}
}

// answered appends the turn's answer and the tool's result and moves to the next turn
// (or conversation), after wait, the tool's latency and the think time. Waits in a row
// are one wait: the window cuts one exactly when it cuts their sum.
func (s *Session) answered(res *client.Result, wait time.Duration) Step {
	a := s.a
	s.conv = Reply(s.conv, res, s.turn)
	s.conv = a.ToolResult(s.rng, s.conv, s.turn)
	wait += a.Spec.ToolLatency.D() + a.Spec.ThinkTime.D()
	if a.Spec.Turns != 0 && s.turn >= a.Spec.Turns {
		// The conversation reached its turn limit.
		if !a.Spec.Restart {
			return Step{Wait: wait, End: true}
		}
		s.conversation()
		return Step{Wait: wait}
	}
	s.nextTurn()
	return Step{Wait: wait}
}
