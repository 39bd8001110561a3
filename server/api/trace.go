package api

import (
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"pdsoak/server/gen"
	"pdsoak/traceparent"
)

// traceTable holds the trace id of every in-flight request that came with a valid
// traceparent, by request id, so /debug/requests can show it beside the request: a
// drop's forensics bundle then names the trace the harness exported.
type traceTable struct {
	mu sync.Mutex
	m  map[string]traceEntry
}

type traceEntry struct {
	id string
	n  int // requests in flight under this request id (a client may reuse one)
}

func (t *traceTable) add(rid, traceID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]traceEntry{}
	}
	e := t.m[rid]
	t.m[rid] = traceEntry{id: traceID, n: e.n + 1}
}

func (t *traceTable) remove(rid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[rid]; e.n > 1 {
		t.m[rid] = traceEntry{id: e.id, n: e.n - 1}
	} else {
		delete(t.m, rid)
	}
}

// fill returns reqs with TraceID set on the requests the table knows: a copy, since
// the inspector may hand out a slice it keeps.
func (t *traceTable) fill(reqs []gen.RequestInfo) []gen.RequestInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) == 0 {
		return reqs
	}
	reqs = slices.Clone(reqs)
	for i := range reqs {
		if e, ok := t.m[reqs[i].ID]; ok && reqs[i].TraceID == "" {
			reqs[i].TraceID = e.id
		}
	}
	return reqs
}

// withTrace honours the request's traceparent: a valid one goes into the request's
// context (the router forwards it to both legs) and into the trace table until the
// returned func is called. An invalid one is ignored, as the W3C specification says a
// receiver must (the request is served; it just joins no trace).
func (h *Handler) withTrace(r *http.Request, rid string) (*http.Request, func()) {
	v := r.Header.Get(traceparent.Header)
	if v == "" {
		return r, func() {}
	}
	tp, err := traceparent.Parse(v)
	if err != nil {
		h.log.Debug("traceparent ignored", "rid", rid, "err", err) // the error, never the value
		return r, func() {}
	}
	h.traces.add(rid, tp.TraceIDHex())
	return r.WithContext(traceparent.NewContext(r.Context(), tp)), func() { h.traces.remove(rid) }
}

// traceLog adds the request's trace id to its logger, so one grep of a trace id finds
// the request's lines in every process of the topology.
func traceLog(log *slog.Logger, r *http.Request) *slog.Logger {
	if tp, ok := traceparent.FromContext(r.Context()); ok {
		return log.With("trace_id", tp.TraceIDHex())
	}
	return log
}
