package sim

import (
	"pdsoak/harness/client"
	"pdsoak/harness/workload"
)

// startTrace sends a trace workload's schedule (workload.Trace.Sched, the schedule a
// real run replays), each request at its arrival on the virtual clock, built by the
// real workload's Request.
func (r *runner) startTrace(t *workload.Trace) {
	from, _ := r.window(&t.Common)
	if len(t.Sched) == 0 {
		return
	}
	r.active++
	left := len(t.Sched)
	done := func() {
		if left--; left == 0 {
			r.active--
		}
	}
	for k, tr := range t.Sched {
		at := from.Add(tr.At)
		r.loop.At(at, func() {
			if r.interrupted != nil {
				done()
				return
			}
			r.send(t.Request(k, at), false, false, nil, func(*client.Result) { done() })
		})
	}
}
