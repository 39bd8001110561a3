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
// one-chunk answer, an error, or waiting requests that all got their token first
// count nothing.
func TestLiveStatsQueuedBehind(t *testing.T) {
	begin := func(s *LiveStats, n int) {
		for range n {
			s.Sent.Add(1)
			s.Began()
		}
	}
	t.Run("a stream served while others wait", func(t *testing.T) {
		var s LiveStats
		begin(&s, 5)
		s.FirstToken()
		s.Count(ledger.OutcomeOK, true, 3)
		assert.Equal(t, int64(4), s.Snapshot().QueuedBehind)
		s.FirstToken()
		s.FirstToken()
		s.Count(ledger.OutcomeOK, true, 3) // two still wait: the most seen stays
		assert.Equal(t, int64(4), s.Snapshot().QueuedBehind)
	})
	t.Run("everyone had a first token", func(t *testing.T) {
		var s LiveStats
		begin(&s, 3)
		for range 3 {
			s.FirstToken()
		}
		s.Count(ledger.OutcomeOK, true, 5)
		assert.Zero(t, s.Snapshot().QueuedBehind)
	})
	t.Run("one chunk is no proof", func(t *testing.T) {
		var s LiveStats
		begin(&s, 3)
		s.FirstToken()
		s.Count(ledger.OutcomeOK, true, 1)
		assert.Zero(t, s.Snapshot().QueuedBehind)
	})
	t.Run("errors without a token do not wait", func(t *testing.T) {
		var s LiveStats
		begin(&s, 3)
		s.Count(ledger.OutcomeHTTPError, false, 0)
		s.Count(ledger.OutcomeRejected, false, 0)
		s.FirstToken()
		s.Count(ledger.OutcomeOK, true, 4)
		st := s.Snapshot()
		assert.Zero(t, st.QueuedBehind)
		assert.Equal(t, RunStats{Sent: 3, Done: 3, OK: 1, Rejected: 1, Errors: 1, FirstTokens: 1}, st)
	})
	t.Run("a failed stream proves nothing", func(t *testing.T) {
		var s LiveStats
		begin(&s, 3)
		s.FirstToken()
		s.Count(ledger.OutcomeStalled, true, 4)
		assert.Zero(t, s.Snapshot().QueuedBehind)
	})
	t.Run("nil counts nothing", func(t *testing.T) {
		var s *LiveStats
		s.Began()
		s.FirstToken()
		s.Count(ledger.OutcomeOK, true, 2)
	})
}
