package harness

import (
	"net/http"

	"pdsoak/harness/workload"
	"pdsoak/traceparent"
)

// stampTrace gives the request its W3C traceparent, derived from the run's seed and the
// request id (a replay carries the same ids), so the server's traces can be joined to
// the harness's. The header map is the request's own copy: workloads may share one.
func stampTrace(seed int64, r *workload.Req) {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(traceparent.Header, traceparent.Derive(seed, r.ID).String())
	r.Header = h
}

// traceID is the trace id of the traceparent stampTrace set ("" when none): the
// ledger's trace_id. Header values are never written to outputs, this id is the one
// part of one that is.
func traceID(r *workload.Req) string {
	tp, err := traceparent.Parse(r.Header.Get(traceparent.Header))
	if err != nil {
		return ""
	}
	return tp.TraceIDHex()
}
