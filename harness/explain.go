package harness

import (
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/harness/client"
	"pdsoak/ledger"
	"pdsoak/reports"
)

// faultLog follows the run's fault events as the ledger writes them, so each request
// can be given its cause (reports.Cause) when it ends. Safe for concurrent use.
type faultLog struct {
	mu     sync.RWMutex
	t      reports.FaultTracker
	margin time.Duration
}

// add folds a ledger event (fault_start, fault_stop; others are ignored).
func (f *faultLog) add(ev ledger.Event) {
	if ev.Type != ledger.EventFaultStart && ev.Type != ledger.EventFaultStop {
		return
	}
	f.mu.Lock()
	f.t.Add(ev)
	f.mu.Unlock()
}

// cause is the request's cause by the one rule, over the faults seen so far: a fault
// that explains a request has started before it ended, and a margin after a stop
// counts only for requests that began then.
func (f *faultLog) cause(o ledger.Outcome, start, end time.Time) string {
	if f == nil {
		return reports.Cause(reports.CauseRequest{Outcome: o, Start: start, End: end}, nil, 0)
	}
	f.mu.RLock()
	w := f.t.Windows()
	f.mu.RUnlock()
	return reports.Cause(reports.CauseRequest{Outcome: o, Start: start, End: end}, w, f.margin)
}

// liveReqs are the requests in flight, for the interrupt's look at what is overdue.
type liveReqs struct {
	m sync.Map // *liveReq -> nil (keyed by pointer: a string key is boxed per request)
}

type liveReq struct {
	d      client.Deadlines
	stream bool
	sent   atomic.Int64 // unix nanos; 0: not yet
	first  atomic.Int64
}

func (l *liveReqs) start(r *client.Request) *liveReq {
	lr := &liveReq{}
	l.track(lr, r)
	return lr
}

// track adds r, recorded in lr (the executor's is a field of the request's observer).
func (l *liveReqs) track(lr *liveReq, r *client.Request) {
	lr.d, lr.stream = r.Deadlines, r.Stream
	l.m.Store(lr, nil)
}

func (l *liveReqs) end(lr *liveReq) { l.m.Delete(lr) }

// pastFirstToken counts the requests in flight at now that are past their
// first-token deadline without a first token (or past their total deadline), and
// the age of the oldest.
func (l *liveReqs) pastFirstToken(now time.Time) (n int, oldest time.Duration) {
	l.m.Range(func(k, _ any) bool {
		lr := k.(*liveReq)
		sent := lr.sent.Load()
		if sent == 0 {
			return true
		}
		age := now.Sub(time.Unix(0, sent))
		overdue := lr.d.Total > 0 && age > lr.d.Total
		if lr.stream && lr.first.Load() == 0 && lr.d.FirstToken > 0 && age > lr.d.FirstToken {
			overdue = true
		}
		if overdue {
			n++
			oldest = max(oldest, age)
		}
		return true
	})
	return n, oldest
}
