package sim

import "time"

// attemptDecodeOnly is Router.attemptDecodeOnly on the event loop: the request goes to
// decode worker d alone, without a bootstrap room (router.PickRoute chose it under
// --pd-fallback decode-only), and decode computes the prompt itself.
func (r *simRouter) attemptDecodeOnly(q *rreq, d *rworker) {
	r.setStage(q, "decode-only")
	q.room, q.pName, q.dName = nil, "", d.w.name
	d.outstanding++
	a := &attempt{r: q, d: d, prefillEnd: true}
	q.cur = a
	wr := *q.req
	wr.Bootstrap, wr.DecodeOnly = nil, true
	if !wr.Deadline.IsZero() {
		wr.Deadline = time.UnixMilli(wr.Deadline.UnixMilli()) // DeadlineUnixMs on the wire
	}
	a.dLeg = r.leg(a, d, &wr)
	if !a.over {
		d.watchers = append(d.watchers, a)
	}
}
