// Package traceparent is the W3C Trace Context `traceparent` header
// (https://www.w3.org/TR/trace-context/): the harness derives one per request from the
// run's seed and the request id, so a replay of the same scenario carries the same trace
// ids; the reference server parses it, logs the trace id beside its request id and shows
// it in /debug/requests; the router forwards it to both legs.
//
//	tp := traceparent.Derive(seed, requestID)  // pure: same inputs, same ids
//	req.Header.Set(traceparent.Header, tp.String())
//	...
//	tp, err := traceparent.Parse(r.Header.Get(traceparent.Header)) // server side
//	ctx = traceparent.NewContext(ctx, tp)                           // router: legs forward it
package traceparent
