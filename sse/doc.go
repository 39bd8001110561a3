// Package sse is a strict, allocation-light parser for text/event-stream bodies as
// OpenAI-compatible servers send them. It is the project's only SSE parser: the harness
// client reads OpenAI streams with it and the PD router reads its workers' /generate
// streams with it.
//
// It follows the WHATWG rules (lines end in LF, CRLF or a lone CR; "field: value";
// a blank line dispatches; data lines join with "\n"), and it reports comments
// (lines starting with ':') as their own items, so a caller can tell keep-alives
// from progress: a stream that sends only comments has made no progress.
//
// It never blocks on more input than the event it is parsing needs (a lone CR ends a
// line without peeking at the next byte), and lines longer than MaxLine are an error
// instead of unbounded memory. A source that can wait for input without a buffer (a
// ReadableWaiter, such as the harness client's socket body) lets an idle Reader hand
// its buffer back to a shared pool, so idle streams hold none.
//
// Main loop:
//
//	r := sse.NewReader(resp.Body)
//	for {
//		ev, err := r.Next()
//		if err != nil { // io.EOF: the stream ended cleanly between events
//			break
//		}
//		if ev.Comment {
//			continue // keep-alive: not progress
//		}
//		handle(ev.Type, ev.Data)
//	}
package sse
