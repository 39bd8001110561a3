package harness

import (
	"pdsoak/harness/workload"
	"pdsoak/traceparent"
)

// stampTrace gives the request its W3C traceparent, derived from the run's seed and the
// request id (a replay carries the same ids), so the server's traces can be joined to
// the harness's. It is a field of the request, not a header map entry: no map per
// request (a workload's own traceparent header, if it sets one, wins).
func stampTrace(seed int64, r *workload.Req) {
	r.TraceParent = traceparent.Derive(seed, r.ID).String()
}

// traceID is the trace id of the traceparent the request carries ("" when none): the
// ledger's trace_id. Header values are never written to outputs, this id is the one
// part of one that is.
func traceID(r *workload.Req) string {
	v := r.Header.Get(traceparent.Header)
	if v == "" {
		v = r.TraceParent
	}
	id, _ := traceparent.TraceIDOf(v)
	return id
}
