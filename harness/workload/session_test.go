package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"pdsoak/harness/client"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// sessionFor builds agent 1 of an agents workload with the given spec fields.
func sessionFor(t *testing.T, yaml string, budget *rate.Limiter) *Session {
	t.Helper()
	sc, err := scenarios.Parse("session.yaml", []byte(yaml))
	require.NoError(t, err)
	sc.ApplyDefaults()
	w, err := New(sc, 0, WithRetryBudget(budget))
	require.NoError(t, err)
	return w.(*Agents).Sessions()[0]
}

// sent is one request a stepped session sent: its id and when (from the start).
type sent struct {
	id string
	at time.Duration
}

// stepSession drives s on a virtual clock as a driver would, answering request k with
// outcomes[k] (ok once they run out), for at most n sends or until the window (until,
// from the start) cuts a wait; it returns what it sent and whether the session ended
// itself (End) rather than by the window.
func stepSession(s *Session, outcomes []ledger.Outcome, retryAfter string, n int, until time.Duration) ([]sent, bool) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	var out []sent
	for st := s.Start(); len(out) < n; {
		if now.Add(st.Wait).Sub(t0) >= until {
			s.Stop(now)
			return out, false
		}
		now = now.Add(st.Wait)
		if st.End {
			return out, true
		}
		q := s.Req(now)
		if !q.Scheduled.Equal(now) {
			panic("a session's request is scheduled when it is built")
		}
		out = append(out, sent{q.ID, now.Sub(t0)})
		res := &client.Result{ID: q.ID, Outcome: ledger.OutcomeOK, Text: "ok"}
		if k := len(out) - 1; k < len(outcomes) {
			res.Outcome = outcomes[k]
		}
		if res.Outcome == ledger.OutcomeRejected {
			res.Status, res.RetryAfter = 429, retryAfter
		}
		now = now.Add(time.Second) // every answer takes a second
		st = s.Result(now, res, now.Sub(t0) >= until)
	}
	return out, false
}

// TestSessionSteps steps the agent state machine both drivers run: the ids it sends,
// when, and how it ends.
func TestSessionSteps(t *testing.T) {
	const base = "name: s\nduration: 1h\nworkloads:\n  - {name: a, type: agents, agents: 1, "
	rej, lost, ok := ledger.OutcomeRejected, ledger.OutcomeTransportError, ledger.OutcomeOK
	for _, tt := range []struct {
		name     string
		spec     string
		outcomes []ledger.Outcome
		until    time.Duration
		want     []sent
		ended    bool
	}{
		{name: "turns, tool latency and think time", spec: "turns: 3, tool_latency: 2s, think_time: 3s}",
			want:  []sent{{"a-s001-t001", 0}, {"a-s001-t002", 6 * time.Second}, {"a-s001-t003", 12 * time.Second}},
			ended: true},
		{name: "a refusal is retried after Retry-After under its own id", spec: "turns: 2, retries: 2}",
			outcomes: []ledger.Outcome{rej, rej, ok},
			want:     []sent{{"a-s001-t001", 0}, {"a-s001-t001-r1", 4 * time.Second}, {"a-s001-t001-r2", 8 * time.Second}, {"a-s001-t002", 9 * time.Second}},
			ended:    true},
		{name: "no retry left: Retry-After still passes before the next turn", spec: "turns: 2, retries: 1}",
			outcomes: []ledger.Outcome{rej, rej},
			want:     []sent{{"a-s001-t001", 0}, {"a-s001-t001-r1", 4 * time.Second}, {"a-s001-t002", 8 * time.Second}},
			ended:    true},
		{name: "a lost connection backs off, a refused re-send is the answer", spec: "turns: 2, retries: 3}",
			outcomes: []ledger.Outcome{lost, lost, rej},
			want: []sent{{"a-s001-t001", 0}, {"a-s001-t001-x1", time.Second + MinReconnectWait},
				{"a-s001-t001-x2", 2*time.Second + 3*MinReconnectWait}, {"a-s001-t002", 3*time.Second + 3*MinReconnectWait}},
			ended: true},
		{name: "restart starts the next conversation", spec: "turns: 1, restart: true}",
			want: []sent{{"a-s001-t001", 0}, {"a-s001-c002-t001", time.Second}, {"a-s001-c003-t001", 2 * time.Second}}},
		{name: "the window cuts the wait before a turn", spec: "turns: 5, think_time: 10s}", until: 15 * time.Second,
			want: []sent{{"a-s001-t001", 0}, {"a-s001-t002", 11 * time.Second}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			until := tt.until
			if until == 0 {
				until = time.Hour
			}
			got, ended := stepSession(sessionFor(t, base+tt.spec+"\n", rate.NewLimiter(rate.Inf, 0)), tt.outcomes, "3", len(tt.want), until)
			assert.Equal(t, tt.want, got)
			if tt.ended {
				_, ended = stepSession(sessionFor(t, base+tt.spec+"\n", rate.NewLimiter(rate.Inf, 0)), tt.outcomes, "3", len(tt.want)+1, until)
			}
			assert.Equal(t, tt.ended, ended)
		})
	}
}

// TestSessionRetryBudget: a retry waits for the shared budget, a retry whose wait the
// window cuts gives its budget back (Stop), and one that would wait longer than
// MaxRetryBudgetWait is not made.
func TestSessionRetryBudget(t *testing.T) {
	const spec = "name: s\nduration: 1h\nworkloads:\n  - {name: a, type: agents, agents: 1, turns: 1, retries: 5}\n"
	now := time.Unix(1_000_000, 0)
	budget := rate.NewLimiter(rate.Every(2*time.Second), 1)
	rejected := &client.Result{Outcome: ledger.OutcomeRejected, Status: 429, RetryAfter: "0"}

	s := sessionFor(t, spec, budget)
	s.Start()
	s.Req(now)
	st := s.Result(now, rejected, false)
	assert.Equal(t, time.Duration(0), st.Wait, "the budget's one token is there")
	s.Req(now)
	st = s.Result(now, rejected, false)
	assert.Equal(t, 2*time.Second, st.Wait, "the next retry waits for the budget")
	s.Stop(now) // the window ended during that wait: the token goes back
	assert.InDelta(t, 0, budget.TokensAt(now), 1e-9, "a cut retry gives back what it reserved")

	// Spend the budget 3 tokens ahead: a retry would wait 6s > MaxRetryBudgetWait.
	for range 3 {
		budget.ReserveN(now, 1)
	}
	s = sessionFor(t, spec, budget)
	s.Start()
	s.Req(now)
	st = s.Result(now, rejected, false)
	assert.True(t, st.End, "no retry beyond the budget's wait: the turn (the last) is answered")
}

// TestSessionCancelledAtTheWindowEnds: a request the runner cancelled at the window's end
// ends the session; the same outcome inside the window is just the turn's answer.
func TestSessionCancelledAtTheWindowEnds(t *testing.T) {
	const spec = "name: s\nduration: 1h\nworkloads:\n  - {name: a, type: agents, agents: 1, turns: 3}\n"
	now := time.Unix(1_000_000, 0)
	cancelled := &client.Result{Outcome: ledger.OutcomeCancelled}
	s := sessionFor(t, spec, rate.NewLimiter(rate.Inf, 0))
	s.Start()
	s.Req(now)
	assert.True(t, s.Result(now, cancelled, true).End)
	s = sessionFor(t, spec, rate.NewLimiter(rate.Inf, 0))
	s.Start()
	s.Req(now)
	st := s.Result(now, cancelled, false)
	assert.False(t, st.End)
	assert.Equal(t, "a-s001-t002", s.Req(now).ID)
}
