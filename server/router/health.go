package router

// Health is one worker's health as the router tracks it, a small state machine shared
// by the Router (under the worker's lock) and the simulator: a passing check marks the
// worker healthy at once; threshold failed checks in a row mark it unhealthy; a
// transport error on a request marks it unhealthy at once (MarkDown). The methods
// report whether Healthy changed, so that the caller carries out the transition (the
// Router closes the worker's down channel, which fails the requests watching it under
// abort-on-unhealthy).
type Health struct {
	Healthy bool
	// Fails counts the failed checks in a row.
	Fails int
}

// Checked records the result of one health check.
func (h *Health) Checked(ok bool, threshold int) (changed bool) {
	if ok {
		h.Fails = 0
		changed = !h.Healthy
		h.Healthy = true
		return changed
	}
	h.Fails++
	if h.Healthy && h.Fails >= threshold {
		h.Healthy = false
		return true
	}
	return false
}

// MarkDown marks the worker unhealthy at once, as if threshold checks had failed: the
// next passing check brings it back.
func (h *Health) MarkDown(threshold int) (changed bool) {
	h.Fails = max(h.Fails, threshold)
	changed = h.Healthy
	h.Healthy = false
	return changed
}
