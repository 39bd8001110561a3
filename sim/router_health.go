package sim

import (
	"slices"
	"time"

	"pdsoak/server/router"
)

// The simulated router's health checks: /health over the router's link to each worker,
// every --health-interval, bounded by --health-timeout; the results and the transport
// errors on requests go through router.Health, the real router's tracker, and a worker
// marked unhealthy is handed to every Flow (Flow.WorkerDown decides whether it matters).

// markDown marks worker i unhealthy at once (a transport error on a request).
func (r *simRouter) markDown(i int) {
	r.track(r.ws[i], r.ws[i].h.MarkDown(router.DefaultFailThreshold))
}

// track carries out a health transition (changed) of rw decided by router.Health.
func (r *simRouter) track(rw *rworker, changed bool) {
	if !changed || rw.h.Healthy {
		return
	}
	i := slices.Index(r.ws, rw)
	for _, q := range slices.Clone(r.reqs) {
		q.f.WorkerDown(i)
	}
}

// scheduleCheck polls rw's /health after d.
func (r *simRouter) scheduleCheck(rw *rworker, d time.Duration) {
	inc := r.inc
	r.t.loop.After(d, func() { r.post(inc, func() { r.check(rw) }) })
}

// check is one /health call over the router's link to the worker: refused when the
// worker is down or the link partitioned, unanswered (the health timeout) when the
// worker is paused, else the worker's health as it is when the call arrives.
func (r *simRouter) check(rw *rworker) {
	start, inc, w := r.t.loop.Now(), r.inc, rw.w
	answered := false
	var c *conn
	var to *Timer
	result := func(ok bool) {
		if answered {
			return
		}
		answered = true
		r.t.loop.Stop(to)
		if c != nil {
			c.close()
		}
		r.post(inc, func() {
			r.track(rw, rw.h.Checked(ok, router.DefaultFailThreshold))
			r.scheduleCheck(rw, max(start.Add(r.spec.HealthInterval).Sub(r.t.loop.Now()), 0))
		})
	}
	err := ErrConnRefused
	if w.alive {
		c, err = r.t.links["router->"+w.name].dial()
	}
	if err != nil {
		result(false)
		return
	}
	to = r.t.loop.After(r.spec.HealthTimeout, func() { result(false) })
	c.onBreak = append(c.onBreak, func(error) { result(false) })
	winc := w.inc
	c.send(up, 64, func() {
		w.post(winc, func() {
			ok := w.healthy() == nil
			c.send(down, 64, func() { result(ok) })
		})
	})
}
