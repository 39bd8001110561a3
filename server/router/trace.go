package router

import (
	"context"

	"pdsoak/traceparent"
)

// appendTraceparent writes the traceparent header line of the client's request (which
// ctx carries) into a raw leg request, so both legs join the client's trace; nothing
// when the client sent none.
func appendTraceparent(req []byte, ctx context.Context) []byte {
	tp, ok := traceparent.FromContext(ctx)
	if !ok {
		return req
	}
	req = append(req, "Traceparent: "...)
	req = append(req, tp.String()...)
	return append(req, "\r\n"...)
}
