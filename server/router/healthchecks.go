package router

import (
	"sync"
	"time"
)

// HealthChecks is when the router checks its workers and what an answer does, one
// state machine that the Router's health goroutine (Start) and the simulated router
// both drive: a round checks every worker at once, each check bounded by Timeout; each
// answer goes to its worker's WorkerState at once (Checked: threshold failures in a row
// mark it unhealthy, a pass brings it back); the round ends with its last answer, and
// the next round begins at the first tick of the interval (ticks counted from the end
// of the first round) after the round began, or at once when that tick passed while the
// round ran (a ticker drops the ticks its reader misses). The first round runs before
// the router serves. It is safe for concurrent use (the Router answers from one
// goroutine per check).
type HealthChecks struct {
	pool              *Pool
	interval, timeout time.Duration
	threshold         int

	mu      sync.Mutex
	origin  time.Time // the end of the first round: the ticks count from it
	began   time.Time
	pending int
}

// NewHealthChecks returns the schedule of pool's checks (interval, timeout, threshold:
// the options WithHealthInterval, WithHealthTimeout, WithFailThreshold).
func NewHealthChecks(pool *Pool, interval, timeout time.Duration, threshold int) *HealthChecks {
	return &HealthChecks{pool: pool, interval: interval, timeout: timeout, threshold: threshold}
}

// Begin starts a round at now: check every worker of the pool, each for at most the
// timeout it returns, and hand each answer to Answered.
func (h *HealthChecks) Begin(now time.Time) (timeout time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.began, h.pending = now, len(h.pool.ws)
	return h.timeout
}

// Answered records worker i's answer at now (err nil: the check passed). changed: the
// worker's health changed (under abort-on-unhealthy its requests then fail, see
// Flow.WorkerDown). over: that was the round's last answer, and the next round begins
// at next.
func (h *HealthChecks) Answered(i int, err error, now time.Time) (changed, over bool, next time.Time) {
	why := ""
	if err != nil {
		why = err.Error()
	}
	changed = h.pool.ws[i].Checked(err == nil, h.threshold, why)
	over, next = h.Unanswered(now)
	return changed, over, next
}

// Unanswered ends a check at now without an answer (the router is shutting down); over
// and next as for Answered.
func (h *HealthChecks) Unanswered(now time.Time) (over bool, next time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending--; h.pending > 0 {
		return false, time.Time{}
	}
	if h.origin.IsZero() {
		h.origin = now
	}
	return true, h.next(now)
}

// next is the first tick after the round's start, or now when it passed.
func (h *HealthChecks) next(now time.Time) time.Time {
	k := time.Duration(1)
	if h.interval > 0 && h.began.After(h.origin) {
		k = h.began.Sub(h.origin)/h.interval + 1
	}
	return maxTime(h.origin.Add(k*h.interval), now)
}

// MarkDown marks worker i unhealthy at once after a transport error on a request
// (WorkerState.MarkDown); changed as for Answered.
func (h *HealthChecks) MarkDown(i int, err error) (changed bool) {
	return h.pool.ws[i].MarkDown(h.threshold, err)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
