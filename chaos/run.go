package chaos

import (
	"context"
	"pdsoak/ledger"
	"sync"
	"sync/atomic"
)

// LiveStats are counters a Run updates as it goes; Snapshot reads them.
type LiveStats struct {
	Sent, Done, OK, Rejected, Errors, Cancelled atomic.Int64
}

// Count adds one finished request with outcome o (a nil s counts nothing): the harness's
// executor and the simulator's client both call it for a fault's extra requests.
func (s *LiveStats) Count(o ledger.Outcome) {
	if s == nil {
		return
	}
	s.Done.Add(1)
	switch o {
	case ledger.OutcomeOK:
		s.OK.Add(1)
	case ledger.OutcomeRejected:
		s.Rejected.Add(1)
	case ledger.OutcomeCancelled:
		s.Cancelled.Add(1)
	default:
		s.Errors.Add(1)
	}
}

// Snapshot returns the current values.
func (s *LiveStats) Snapshot() RunStats {
	return RunStats{Sent: s.Sent.Load(), Done: s.Done.Load(), OK: s.OK.Load(),
		Rejected: s.Rejected.Load(), Errors: s.Errors.Load(), Cancelled: s.Cancelled.Load()}
}

// GoRun runs fn in a goroutine under a context that Stop cancels, and returns it as a
// Run: Stats reads the counters fn updates live; Stop cancels and waits for fn. An Env
// implements Load or Disconnect with it:
//
//	func (e *env) Load(ctx context.Context, target string, b chaos.Burst) (chaos.Run, error) {
//		return chaos.GoRun(ctx, func(ctx context.Context, s *chaos.LiveStats) {
//			... send b.Requests requests, s.Sent.Add(1) / s.Rejected.Add(1) as they go ...
//		}), nil
//	}
func GoRun(ctx context.Context, fn func(ctx context.Context, s *LiveStats)) Run {
	ctx, cancel := context.WithCancel(ctx)
	r := &goRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		fn(ctx, &r.stats)
	}()
	return r
}

type goRun struct {
	stats  LiveStats
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (r *goRun) Stats() RunStats { return r.stats.Snapshot() }

func (r *goRun) Stop() {
	r.once.Do(r.cancel)
	<-r.done
}

// FuncRun adapts two funcs to Run (for an Env whose mechanism is a rule it installs and
// removes, like the harness's disconnect rule). A nil StopFunc does nothing.
type FuncRun struct {
	StatsFunc func() RunStats
	StopFunc  func()
}

// Stats implements Run.
func (r FuncRun) Stats() RunStats {
	if r.StatsFunc == nil {
		return RunStats{}
	}
	return r.StatsFunc()
}

// Stop implements Run.
func (r FuncRun) Stop() {
	if r.StopFunc != nil {
		r.StopFunc()
	}
}
