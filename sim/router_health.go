package sim

import (
	"errors"
	"time"

	"pdsoak/server/router"
)

// The simulated router's health checks: /health over the router's link to each worker,
// every --health-interval, bounded by --health-timeout; the results and the transport
// errors on requests go to the worker's router.WorkerState, as in the real router, and
// a worker marked unhealthy is handed to every Flow (Flow.WorkerDown decides whether
// it matters).

// MarkDown marks worker i unhealthy at once (a transport error on a request).
func (r *simRouter) MarkDown(i int, err error) {
	r.track(i, r.Workers()[i].MarkDown(router.DefaultFailThreshold, err))
}

// track carries out a health transition (changed) of worker i.
func (r *simRouter) track(i int, changed bool) {
	if !changed || r.Workers()[i].Healthy() {
		return
	}
	for _, q := range append([]*simReq(nil), r.reqs...) {
		q.f.WorkerDown(i)
	}
}

// scheduleCheck polls worker i's /health after d.
func (r *simRouter) scheduleCheck(i int, d time.Duration) {
	inc := r.inc
	r.t.loop.After(d, func() { r.post(inc, func() { r.check(i) }) })
}

// check is one /health call over the router's link to the worker: refused when the
// worker is down or the link partitioned, unanswered (the health timeout) when the
// worker is paused, else the worker's health as it is when the call arrives.
func (r *simRouter) check(i int) {
	start, inc, w := r.t.loop.Now(), r.inc, r.sw[i]
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
		r.post(inc, func() {
			why := ""
			if err != nil {
				why = err.Error()
			}
			r.track(i, r.Workers()[i].Checked(err == nil, router.DefaultFailThreshold, why))
			r.scheduleCheck(i, max(start.Add(r.spec.HealthInterval).Sub(r.t.loop.Now()), 0))
		})
	}
	err := ErrConnRefused
	if w.alive {
		c, err = r.t.links["router->"+w.name].dial()
	}
	if err != nil {
		result(err)
		return
	}
	to = r.t.loop.After(r.spec.HealthTimeout, func() { result(errHealthTimeout) })
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
