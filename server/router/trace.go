package router

import (
	"context"
	"net/http"

	"pdsoak/traceparent"
)

// traceHeader is the traceparent header of the client's request (which ctx carries),
// for a leg request, so both legs join the client's trace; nil when the client sent
// none (no map is allocated then).
func traceHeader(ctx context.Context) http.Header {
	tp, ok := traceparent.FromContext(ctx)
	if !ok {
		return nil
	}
	return http.Header{"Traceparent": {tp.String()}}
}
