package workload

import "time"

// Extras is how a fault's extra requests go out (queue_saturation and
// kv_pool_exhaustion bursts, client_disconnect's self-cancelling streams): N requests
// of one factory, numbered 0..N-1, all scheduled at the fault's start, at most Window
// in flight. The real runner (a semaphore of goroutines) and the simulator (a send
// per answer on its loop) both take their requests from it, so the numbering, the
// window and the cancel-after rule are one.
type Extras struct {
	c           *Common
	n, window   int
	cancelAfter int
	at          time.Time
	next        int
}

// NewExtras sends n requests of c scheduled at at, conc in flight (0 or more than n:
// all at once), each cancelling itself after cancelAfter tokens (0: never).
func NewExtras(c *Common, n, conc, cancelAfter int, at time.Time) *Extras {
	n = max(n, 0)
	if conc <= 0 || conc > n {
		conc = n
	}
	return &Extras{c: c, n: n, window: conc, cancelAfter: cancelAfter, at: at}
}

// Window is how many requests may be in flight at once: the driver starts that many,
// then one more as each one ends.
func (e *Extras) Window() int { return e.window }

// Next is the next request to send, or nil when all n went out.
func (e *Extras) Next() *Req {
	if e.next >= e.n {
		return nil
	}
	r := e.c.Single(uint64(e.next), e.at)
	e.next++
	r.CancelAfterTokens = e.cancelAfter
	return r
}
