package workload

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"pdsoak/harness/client"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// scriptSender answers each request with the outcome its script gives for the id,
// records every request, and (when quota > 0) blocks a session's request number
// quota+1 until ctx ends, cancelling the run once every session got that far. That
// makes how far an open-ended run gets independent of timing.
type scriptSender struct {
	outcome  func(id string) ledger.Outcome
	quota    int
	sessions int
	cancel   context.CancelFunc

	mu      sync.Mutex
	reqs    []*Req
	perSess map[int]int
	parked  int
}

func (s *scriptSender) Send(ctx context.Context, r *Req) *client.Result {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	if s.perSess == nil {
		s.perSess = map[int]int{}
	}
	s.perSess[r.Session]++
	park := s.quota > 0 && s.perSess[r.Session] > s.quota
	if park {
		if s.parked++; s.parked == s.sessions {
			s.cancel()
		}
	}
	s.mu.Unlock()
	if park {
		<-ctx.Done()
		return &client.Result{ID: r.ID, Outcome: ledger.OutcomeCancelled}
	}
	o := ledger.OutcomeOK
	if s.outcome != nil {
		o = s.outcome(r.ID)
	}
	res := &client.Result{ID: r.ID, Outcome: o, Text: "reply to " + r.ID}
	if o == ledger.OutcomeRejected {
		res.Status, res.RetryAfter = 429, "0"
	}
	return res
}

func (s *scriptSender) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = r.ID
	}
	return out
}

func (s *scriptSender) byID() map[string]*Req {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]*Req, len(s.reqs))
	for _, r := range s.reqs {
		m[r.ID] = r
	}
	return m
}

func always(o ledger.Outcome) func(string) ledger.Outcome {
	return func(string) ledger.Outcome { return o }
}

func TestAgentsRetries(t *testing.T) {
	tests := []struct {
		name    string
		retries int
		outcome func(id string) ledger.Outcome
		want    []string
	}{
		{
			name: "no retries by default", retries: 0, outcome: always(ledger.OutcomeRejected),
			want: []string{"ag-s001-t001", "ag-s001-t002"},
		},
		{
			name: "always refused: N retries per turn", retries: 2, outcome: always(ledger.OutcomeRejected),
			want: []string{"ag-s001-t001", "ag-s001-t001-r1", "ag-s001-t001-r2", "ag-s001-t002", "ag-s001-t002-r1", "ag-s001-t002-r2"},
		},
		{
			name: "refused once: one retry", retries: 3,
			outcome: func(id string) ledger.Outcome {
				if strings.Contains(id, "-r") {
					return ledger.OutcomeOK
				}
				return ledger.OutcomeRejected
			},
			want: []string{"ag-s001-t001", "ag-s001-t001-r1", "ag-s001-t002", "ag-s001-t002-r1"},
		},
		{
			name: "errors after headers are not retried", retries: 3, outcome: always(ledger.OutcomeStreamError),
			want: []string{"ag-s001-t001", "ag-s001-t002"},
		},
		{
			name: "silent drops are not retried", retries: 3, outcome: always(ledger.OutcomeStalled),
			want: []string{"ag-s001-t001", "ag-s001-t002"},
		},
		{
			name: "http errors are not retried", retries: 3, outcome: always(ledger.OutcomeHTTPError),
			want: []string{"ag-s001-t001", "ag-s001-t002"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := scenario(3, scenarios.Workload{Name: "ag", Type: "agents", Agents: 1, Turns: 2, Retries: tt.retries})
			w, err := New(sc, 0, WithRetryBudget(unbounded()))
			require.NoError(t, err)
			s := &scriptSender{outcome: tt.outcome}
			st := w.Run(context.Background(), time.Now(), s)
			require.Equal(t, tt.want, s.ids())
			assert.Equal(t, len(tt.want), st.Requests, "stats")
			// A retry re-sends the same turn: same session, turn and messages.
			reqs := s.byID()
			for id, r := range reqs {
				base, _, retry := strings.Cut(id, "-r")
				if !retry {
					continue
				}
				orig := reqs[base]
				assert.Equal(t, orig.Session, r.Session, "%s vs %s", id, base)
				assert.Equal(t, orig.Turn, r.Turn, "%s vs %s", id, base)
				assert.Equal(t, orig.Messages, r.Messages, "%s vs %s", id, base)
			}
		})
	}
}

// Retries stop when the window ends, even when the server keeps refusing.
func TestAgentsRetriesStopAtCtxEnd(t *testing.T) {
	sc := scenario(3, scenarios.Workload{Name: "ag", Type: "agents", Agents: 2, Turns: 0, Retries: 100})
	w, _ := New(sc, 0, WithRetryBudget(unbounded()))
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	n := 0
	s := &scriptSender{outcome: func(string) ledger.Outcome {
		mu.Lock()
		defer mu.Unlock()
		if n++; n == 20 {
			cancel()
		}
		return ledger.OutcomeRejected
	}}
	done := make(chan Stats)
	go func() { done <- w.Run(ctx, time.Now(), s) }()
	select {
	case st := <-done:
		// The 20th cancelled; the other session may have had one more in flight.
		assert.GreaterOrEqual(t, st.Requests, 20)
		assert.LessOrEqual(t, st.Requests, 22)
	case <-time.After(time.Minute):
		cancel()
		require.FailNow(t, "retries did not stop when ctx ended")
	}
}

func TestAgentsRestart(t *testing.T) {
	tests := []struct {
		name     string
		restart  bool
		sessions int
		quota    int
		want     []string // ids of session 1, in order
	}{
		{
			name: "without restart a session ends after its turns", restart: false, sessions: 1,
			want: []string{"ag-s001-t001", "ag-s001-t002"},
		},
		{
			name: "restart begins fresh conversations until ctx ends", restart: true, sessions: 1, quota: 6,
			want: []string{"ag-s001-t001", "ag-s001-t002", "ag-s001-c002-t001", "ag-s001-c002-t002",
				"ag-s001-c003-t001", "ag-s001-c003-t002", "ag-s001-c004-t001"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := scenario(5, scenarios.Workload{Name: "ag", Type: "agents", Agents: tt.sessions, Turns: 2, Restart: tt.restart})
			w, _ := New(sc, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &scriptSender{quota: tt.quota, sessions: tt.sessions, cancel: cancel}
			w.Run(ctx, time.Now(), s)
			got := s.ids()
			require.Equal(t, tt.want, got)
			reqs := s.byID()
			system := reqs["ag-s001-t001"].Messages[0]
			tasks := map[string]bool{}
			for _, id := range got {
				r := reqs[id]
				assert.Equal(t, system, r.Messages[0], "%s: system prompt changed across conversations", id)
				if r.Turn == 1 {
					// A fresh conversation: system and a new task only.
					require.Len(t, r.Messages, 2, id)
					assert.False(t, tasks[r.Messages[1].Content], "%s: task %q repeats", id, r.Messages[1].Content)
					tasks[r.Messages[1].Content] = true
				} else {
					assert.Len(t, r.Messages, 4, id)
				}
			}
		})
	}
}

// A restarting session keeps going until the window's end, not just its turn limit.
// The window is seconds long so that a loaded machine still restarts inside it.
func TestAgentsRestartLastsTheWindow(t *testing.T) {
	sc := scenario(5, scenarios.Workload{Name: "ag", Type: "agents", Agents: 2, Turns: 1, Restart: true,
		ThinkTime: scenarios.Duration(5 * time.Millisecond), Duration: scenarios.Duration(3 * time.Second)})
	w, _ := New(sc, 0)
	s := &scriptSender{}
	done := make(chan Stats)
	go func() { done <- w.Run(context.Background(), time.Now(), s) }()
	select {
	case st := <-done:
		assert.Greater(t, st.Requests, 2, "sessions did not restart")
	case <-time.After(time.Minute):
		require.FailNow(t, "restarting sessions did not stop at the window's end")
	}
}

// The same scenario and seed give the same requests, ids and bodies, with restart and
// retries; and a session's first conversation does not depend on restart.
func TestAgentsRestartRetriesDeterministic(t *testing.T) {
	refuseSome := func(id string) ledger.Outcome {
		if !strings.Contains(id, "-r") && strings.HasSuffix(id, "2") {
			return ledger.OutcomeRejected
		}
		return ledger.OutcomeOK
	}
	run := func(restart bool) []*Req {
		sc := scenario(11, scenarios.Workload{Name: "ag", Type: "agents", Agents: 3, Turns: 3, Restart: restart,
			Retries: 1, ToolResultBytes: 40})
		w, _ := New(sc, 0, WithRetryBudget(unbounded()))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &scriptSender{outcome: refuseSome, sessions: 3, cancel: cancel}
		if restart {
			s.quota = 9
		}
		w.Run(ctx, time.Now(), s)
		out := append([]*Req(nil), s.reqs...)
		slices.SortFunc(out, func(a, b *Req) int { return strings.Compare(a.ID, b.ID) })
		return out
	}
	a, b := run(true), run(true)
	require.Equal(t, fingerprint(t, a), fingerprint(t, b), "same seed, different requests")
	assert.Len(t, a, 3*10)
	var first []*Req
	for _, r := range a {
		if !strings.Contains(r.ID, "-c0") {
			first = append(first, r)
		}
	}
	assert.Equal(t, fingerprint(t, run(false)), fingerprint(t, first), "first conversation depends on restart")
}

// unbounded is a retry budget that never delays a retry, for tests about something else.
func unbounded() *rate.Limiter { return rate.NewLimiter(rate.Inf, 0) }

// The retry budget bounds the retries of all sessions together: with a budget that
// holds n retries and never refills, a fleet of always-refused agents makes exactly n
// retries, whatever Retries allows; the default budget lets every agent retry once at
// once.
func TestAgentsRetryBudget(t *testing.T) {
	tests := []struct {
		name        string
		agents      int
		retries     int
		budget      *rate.Limiter
		wantRetries int
	}{
		{name: "spent budget: no more retries", agents: 4, retries: 5,
			budget: rate.NewLimiter(0, 3), wantRetries: 3},
		{name: "empty budget: no retry at all", agents: 3, retries: 2,
			budget: rate.NewLimiter(0, 0), wantRetries: 0},
		{name: "default budget: one retry per agent at once", agents: 3, retries: 1,
			wantRetries: 3},
		{name: "unbounded budget: Retries per turn", agents: 3, retries: 2,
			budget: unbounded(), wantRetries: 3 * 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := scenario(3, scenarios.Workload{Name: "ag", Type: "agents", Agents: tt.agents, Turns: 1, Retries: tt.retries})
			var opts []Option
			if tt.budget != nil {
				opts = append(opts, WithRetryBudget(tt.budget))
			}
			w, err := New(sc, 0, opts...)
			require.NoError(t, err)
			s := &scriptSender{outcome: always(ledger.OutcomeRejected)}
			st := w.Run(context.Background(), time.Now(), s)
			retries := 0
			for _, id := range s.ids() {
				if strings.Contains(id, "-r") {
					retries++
				}
			}
			assert.Equal(t, tt.wantRetries, retries, "retries")
			assert.Equal(t, tt.agents+tt.wantRetries, st.Requests, "requests")
		})
	}
}
