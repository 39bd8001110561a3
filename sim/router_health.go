package sim

import (
	"errors"
	"time"
)

// The simulated router's health checks: router.HealthChecks decides when a round
// begins and what an answer does, as in the real router; a check is /health over the
// router's link to the worker, bounded by the round's timeout. A worker going
// unhealthy (a check, or a transport error on a request) is handed to every Flow
// (Flow.WorkerDown decides whether it matters).

// MarkDown marks worker i unhealthy at once (a transport error on a request).
func (r *simRouter) MarkDown(i int, err error) { r.track(i, r.Health.MarkDown(i, err)) }

// track carries out a health transition (changed) of worker i.
func (r *simRouter) track(i int, changed bool) {
	if !changed || r.Workers()[i].Healthy() {
		return
	}
	for _, q := range append([]*simReq(nil), r.reqs...) {
		q.f.WorkerDown(i)
	}
}

// round checks every worker.
func (r *simRouter) round() {
	timeout := r.Health.Begin(r.t.loop.Now())
	for i := range r.sw {
		r.check(i, timeout)
	}
}

// answered hands worker i's answer to the checks; the round's last schedules the next.
func (r *simRouter) answered(i int, err error, now time.Time) {
	changed, over, next := r.Health.Answered(i, err, now)
	r.track(i, changed)
	if over {
		r.starting = false
		inc := r.inc
		r.t.loop.At(next, func() { r.post(inc, r.round) })
	}
}

// check is one /health call over the router's link to the worker: refused when the
// worker is down or the link partitioned, unanswered (the timeout) when the worker is
// paused, else the worker's health as it is when the call arrives.
func (r *simRouter) check(i int, timeout time.Duration) {
	inc, w := r.inc, r.sw[i]
	answered := false
	var c *conn
	var to *Timer
	result := func(err error) {
		if answered {
			return
		}
		answered = true
		r.t.loop.Stop(to)
		if c != nil {
			c.close()
		}
		r.post(inc, func() { r.answered(i, err, r.t.loop.Now()) })
	}
	err := ErrConnRefused
	if w.alive {
		c, err = r.t.links["router->"+w.name].dial()
	}
	if err != nil {
		result(err)
		return
	}
	to = r.t.loop.After(timeout, func() { result(errHealthTimeout) })
	c.onBreak = append(c.onBreak, result)
	winc := w.inc
	c.send(up, 64, func() {
		w.post(winc, func() {
			err := w.healthy()
			c.send(down, 64, func() { result(err) })
		})
	})
}

var errHealthTimeout = errors.New("sim: health check timed out")
