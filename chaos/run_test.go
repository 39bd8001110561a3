package chaos

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/ledger"
)

func TestGoRun(t *testing.T) {
	started := make(chan struct{})
	r := GoRun(context.Background(), func(ctx context.Context, s *LiveStats) {
		s.Sent.Add(3)
		s.Rejected.Add(1)
		close(started)
		<-ctx.Done()
		s.Cancelled.Add(2)
	})
	<-started
	if st := r.Stats(); st.Sent != 3 || st.Rejected != 1 {
		t.Fatalf("live stats = %+v", st)
	}
	r.Stop()
	r.Stop() // idempotent
	if st := r.Stats(); st.Cancelled != 2 {
		t.Fatalf("stats after Stop = %+v", st)
	}
}

func TestFuncRun(t *testing.T) {
	stopped := false
	r := FuncRun{StatsFunc: func() RunStats { return RunStats{Cancelled: 4} }, StopFunc: func() { stopped = true }}
	if r.Stats().Cancelled != 4 {
		t.Fatal("stats")
	}
	r.Stop()
	if !stopped {
		t.Fatal("stop")
	}
	var zero FuncRun
	zero.Stop()
	if zero.Stats() != (RunStats{}) {
		t.Fatal("zero FuncRun")
	}
}

// TestLiveStatsQueuedBehind: RunStats.QueuedBehind is the most requests seen still
// waiting for a first token when a stream ended ok after more than one chunk; a
// one-chunk answer, a failed stream, errors without a token, or waiting requests that
// all got their token first count nothing.
func TestLiveStatsQueuedBehind(t *testing.T) {
	// Each step on a LiveStats whose 5 requests have begun: t is a first token, and an
	// outcome ends a request (with its first token or not, after so many chunks).
	type end struct {
		o      ledger.Outcome
		first  bool
		chunks int
	}
	ok := func(chunks int) end { return end{ledger.OutcomeOK, true, chunks} }
	tests := []struct {
		name  string
		steps []any // "t" or an end
		want  int64
	}{
		{"a stream served while four wait", []any{"t", ok(3)}, 4},
		{"the most seen stays", []any{"t", ok(3), "t", "t", ok(3)}, 4},
		{"everyone had a first token", []any{"t", "t", "t", "t", "t", ok(5)}, 0},
		{"one chunk is no proof", []any{"t", ok(1)}, 0},
		{"a failed stream proves nothing", []any{"t", end{ledger.OutcomeStalled, true, 4}}, 0},
		{"errors without a token do not wait", []any{end{ledger.OutcomeHTTPError, false, 0},
			end{ledger.OutcomeRejected, false, 0}, "t", "t", "t", ok(4)}, 0},
		{"those that ended without a token are not waiting", []any{end{ledger.OutcomeHTTPError, false, 0}, "t", ok(2)}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s LiveStats
			for range 5 {
				s.Sent.Add(1)
				s.Began()
			}
			for _, st := range tc.steps {
				if e, isEnd := st.(end); isEnd {
					s.Count(e.o, e.first, e.chunks)
				} else {
					s.FirstToken()
				}
			}
			assert.Equal(t, tc.want, s.Snapshot().QueuedBehind)
		})
	}
	var none *LiveStats // a nil LiveStats counts nothing
	none.Began()
	none.FirstToken()
	none.Count(ledger.OutcomeOK, true, 2)
}
