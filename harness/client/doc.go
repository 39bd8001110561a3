// Package client is the harness's HTTP client for OpenAI-compatible endpoints. It sends
// one chat or completions request (streaming or not) under four deadlines — connect,
// first token, stall between progress chunks, total — enforced with context causes,
// and classifies the result into exactly one outcome of the taxonomy in
// pdsoak/ledger (ok, rejected, http_error, stream_error, transport_error,
// connection_lost, truncated, invalid, stalled, deadline_exceeded, cancelled), with the
// phase a silent drop happened in. SSE comments and keep-alives are not progress.
//
// The rules are one pure function, Classify (classify.go), over the Facts an exchange
// produced (a deadline that fired, a cancellation, the head, how the body ended —
// cleanly or abruptly —, an error event, a protocol violation, the protocol's end, the
// finish_reason and usage); the simulator (pdsoak/sim) calls it too. What a 2xx answer
// says is read by one state machine, Answer (answer.go): the readers feed it each SSE
// event or the whole body off the wire, the simulator the chunks its front end would
// have written, and it keeps the Result and yields the Facts (Refused does the same for
// an error status, Settle applies the verdict). ok means complete by
// the protocol: a stream request needs a text/event-stream answer with a finish_reason on
// some chunk and then data: [DONE] (what follows is ignored); a whole body needs a JSON
// object whose choices all carry a finish_reason; usage, when sent, must count at least
// the content chunks received; one id per stream, choice indexes below n (1), and an
// object matching the endpoint. A clean end without them is truncated, an abrupt one
// (EOF or reset mid-response) connection_lost. Streams are read with pdsoak/sse.
//
// For http:// targets it speaks HTTP/1.1 on the project's shared wire
// (pdsoak/internal/http1, h1.go): the request's own goroutine dials (through the
// Transport's DialContext), writes and reads, with no goroutines per connection, a
// liveness-checked keep-alive pool whose connections are closed after the idle timeout
// (WithIdleTimeout, default 4 s, below uvicorn's 5 s), the response head parsed from a
// short-lived buffer and chunked bodies decoded in place; cancellation sets the socket's
// deadline in the past. The idle keep-alive race (a reused connection the server closed:
// reset on write, or its end before any response byte) is retried once on a fresh
// connection and counted in Result.ConnRetry. An idle stream holds no read buffer (it
// waits for input with a peek, see sse.ReadableWaiter), so thousands of held streams cost
// about one 8 KiB stack and 4 KiB of heap each. https:// targets use net/http with its
// own Transport (dial timeout, no global timeouts, no proxy, WithTLS); after the head
// both transports take one step (afterHead, read.go). Requests carry an X-Request-ID,
// Accept-Encoding: identity, and every header of WithHeader and Request.Header; a server
// that compresses anyway is decoded (gzip, deflate; coding.go). Timers are
// time.AfterFunc, so a waiting request costs no extra goroutine. Chunks are decoded by
// hand in the common shape, by encoding/json otherwise (chunkjson.go).
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
