package sim

import (
	"slices"
	"time"

	"pdsoak/server/router"
)

// The simulated router's health checks: /health over the router's link to each worker,
// every --health-interval, bounded by --health-timeout; the results and the transport
// errors on requests go through router.Health, the real router's tracker, and a worker
// marked unhealthy fails the attempts watching it (abort-on-unhealthy).

// markDown marks a worker unhealthy at once (a transport error on a request).
func (r *simRouter) markDown(rw *rworker) {
	r.track(rw, rw.h.MarkDown(router.DefaultFailThreshold))
}

// track carries out a health transition (changed) of rw decided by router.Health.
func (r *simRouter) track(rw *rworker, changed bool) {
	if !changed || rw.h.Healthy || !r.spec.AbortOnUnhealthy {
		return
	}
	// abort-on-unhealthy: the attempts watching it fail (relay.run's pDown/dDown).
	for _, a := range slices.Clone(rw.watchers) {
		if a.over {
			continue
		}
		if (rw == a.p && a.pWatch) || rw == a.d {
			r.ended(a, router.UnhealthyError(string(rw.w.role), rw.w.name), true, rw)
		}
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
	start := r.t.loop.Now()
	timeout := r.spec.HealthTimeout
	inc := r.inc
	result := func(ok bool) {
		r.post(inc, func() {
			r.track(rw, rw.h.Checked(ok, router.DefaultFailThreshold))
			next := start.Add(r.spec.HealthInterval)
			if now := r.t.loop.Now(); next.Before(now) {
				next = now
			}
			r.t.loop.At(next, func() { r.post(inc, func() { r.check(rw) }) })
		})
	}
	w := rw.w
	var c *conn
	var err error
	if !w.alive {
		err = ErrConnRefused
	} else {
		c, err = r.t.links["router->"+w.name].dial()
	}
	if err != nil {
		result(false)
		return
	}
	answered := false
	to := r.t.loop.After(timeout, func() {
		if !answered {
			answered = true
			c.close()
			result(false)
		}
	})
	c.onBreak = append(c.onBreak, func(error) {
		if !answered {
			answered = true
			r.t.loop.Stop(to)
			result(false)
		}
	})
	winc := w.inc
	c.send(up, 64, func() {
		w.post(winc, func() {
			ok := w.healthy() == nil
			c.send(down, 64, func() {
				if !answered {
					answered = true
					r.t.loop.Stop(to)
					c.close()
					result(ok)
				}
			})
		})
	})
}
