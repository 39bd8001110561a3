package chaos

import (
	"context"
	"pdsoak/ledger"
	"sync"
	"sync/atomic"
)

// LiveStats are counters a Run updates as it goes; Snapshot reads them. The
// harness's executor and the simulator's client both update them (FirstToken, Count)
// for the requests a fault counts.
type LiveStats struct {
	Sent, Done, OK, Rejected, Errors, Cancelled atomic.Int64
	FirstTokens                                 atomic.Int64
	begun                                       atomic.Int64 // handed to the client (Sent counts them when queued to be)
	doneNoToken                                 atomic.Int64 // ended without a first token
	queuedBehind                                atomic.Int64 // RunStats.QueuedBehind
}

// Began counts a request the client began to send: it dials, or writes on a kept
// connection, at once (a nil s counts nothing).
func (s *LiveStats) Began() {
	if s != nil {
		s.begun.Add(1)
	}
}

// FirstToken counts a request's first content token (a nil s counts nothing).
func (s *LiveStats) FirstToken() {
	if s != nil {
		s.FirstTokens.Add(1)
	}
}

// Count adds one finished request with outcome o, which received its first token or
// not (firstToken) and chunks content chunks (a nil s counts nothing). A stream that
// ended ok after more than one chunk while requests the client began sending before it
// ended still had no first token is what a queue looks like from the client: the server
// held them back while it served this one to its end (RunStats.QueuedBehind). One chunk
// is no such proof: a server answering a batch at once hands out its first tokens in
// some order.
func (s *LiveStats) Count(o ledger.Outcome, firstToken bool, chunks int) {
	if s == nil {
		return
	}
	if o == ledger.OutcomeOK && chunks > 1 {
		// Read before this request counts as done: the others still waiting. A request
		// that ended before it began counts in doneNoToken only, so the guess errs low.
		waiting := s.begun.Load() - s.FirstTokens.Load() - s.doneNoToken.Load()
		for q := s.queuedBehind.Load(); waiting > q && !s.queuedBehind.CompareAndSwap(q, waiting); {
			q = s.queuedBehind.Load()
		}
	}
	if !firstToken {
		s.doneNoToken.Add(1)
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
		Rejected: s.Rejected.Load(), Errors: s.Errors.Load(), Cancelled: s.Cancelled.Load(),
		FirstTokens: s.FirstTokens.Load(), QueuedBehind: s.queuedBehind.Load()}
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
