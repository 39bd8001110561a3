package router

import (
	"context"

	"pdsoak/traceparent"
)

// traceParent is the traceparent of the client's request (which ctx carries), for a
// leg request, so both legs join the client's trace; "" when the client sent none.
func traceParent(ctx context.Context) string {
	tp, ok := traceparent.FromContext(ctx)
	if !ok {
		return ""
	}
	return tp.String()
}
