// Package client is the harness's HTTP client for OpenAI-compatible endpoints. It sends
// one chat or completions request (streaming or not) under four deadlines — connect,
// first token, stall between progress chunks, total — enforced with context causes,
// and classifies the result into exactly one outcome of the taxonomy in
// pdsoak/ledger (ok, rejected, http_error, stream_error, transport_error, truncated,
// invalid, stalled, deadline_exceeded, cancelled), with the phase a silent drop
// happened in. SSE comments and keep-alives are not progress.
//
// ok means complete by the protocol: a stream request needs a text/event-stream answer
// with a finish_reason on some chunk and then data: [DONE] (what follows is ignored);
// a whole body needs a JSON object whose choices all carry a finish_reason; usage, when
// sent, must count at least the content chunks received. A missing finish_reason or
// [DONE] is truncated; a non-SSE answer to a stream request, or disagreeing usage,
// invalid. Streams are read with pdsoak/sse.
//
// For http:// targets it speaks HTTP/1.1 itself (h1.go, h1wire.go): the request's own
// goroutine dials (through the Transport's DialContext), writes and reads, with no
// goroutines per connection, a liveness-checked keep-alive pool, the response head
// parsed from a short-lived buffer and chunked bodies decoded in place; cancellation
// sets the socket's deadline in the past. An idle stream holds no read buffer (it waits
// for input with a peek, see sse.ReadableWaiter), so thousands of held streams cost
// about one 8 KiB stack and 4 KiB of heap each. https:// targets use net/http with its
// own Transport (dial timeout, no global timeouts, no proxy, no compression), so nothing
// else in the process can change its behaviour. Every request carries an X-Request-ID.
// Timers are time.AfterFunc, so a waiting request costs no extra goroutine. Chunks are
// decoded by hand in the common shape, by encoding/json otherwise (chunkjson.go).
//
// Latencies are measured from Request.Scheduled (the intended send time), not from
// the actual send, so a late harness cannot hide queueing (coordinated omission).
// Deadlines are counted from the actual send.
//
// Main loop:
//
//	c, _ := client.New("http://127.0.0.1:8080")
//	res := c.Do(ctx, &client.Request{
//		ID: "r-1", Endpoint: client.EndpointChat, Model: "ref", Stream: true,
//		Messages: []client.Message{{Role: "user", Content: "hi"}}, MaxTokens: 16,
//		Scheduled: time.Now(), Deadlines: client.Deadlines{Total: 10 * time.Second},
//	}, nil)
//	fmt.Println(res.Outcome, res.Phase, res.TTFT())
package client
