// Package http1 is the project's one HTTP/1.1 client wire: the harness's client
// (pdsoak/harness/client) and the router's worker legs (pdsoak/server/router) both use it.
// It holds what the two used to keep in copies: a keep-alive pool with an idle timeout and
// a liveness peek, the request writer, the response-head parser and the body framing.
//
// Why not net/http: its Transport runs two goroutines per connection and hands every read
// and write between them and the caller; at thousands of held streams that is three
// stacks per stream and a scheduler hop per chunk. Here the caller's goroutine dials,
// writes and reads; cancellation is a deadline set on the socket.
//
// The protocol it follows (RFC 9112): chunked bodies (chunk extensions skipped, trailers
// read and dropped), Content-Length bodies, bodies delimited by the connection's close,
// Connection: close and HTTP/1.0 keep-alive, 1xx interim responses skipped, response heads
// bounded by MaxHead (ErrHeadTooLarge past it), obsolete line folding rejected
// (ErrObsFold). A body tells a clean end (io.EOF: the terminator or the length was
// reached) from an abrupt one (ErrConnectionLost: EOF or reset before that); a malformed
// framing is ErrMalformed. Those three facts drive the harness's classification of
// truncated, connection_lost and invalid.
//
// The idle keep-alive race: a server that closes an idle connection (uvicorn after 5 s)
// can do so just as the client reuses it. The pool closes connections idle longer than
// its idle timeout instead of reusing them, peeks before reusing the others, and
// IdleRace tells the caller when a failure looks like that race (a reused connection, the
// request refused, or EOF or reset before any response byte), so it may retry once on a
// fresh one. Only a refused write proves the server never saw the request.
//
// One server-side piece: ParseRequestHead reads the simple request heads (the router's
// /generate) that server/api's lean server answers without net/http, and declines every
// other head, which net/http then reads (FuzzParseRequestHead: an accepted head means
// the same to net/http).
//
// Main loop:
//
//	p := http1.NewPool(http1.WithIdleTimeout(4 * time.Second))
//	nc, reused := p.Get(addr)
//	if nc == nil { nc, _ = net.Dial("tcp", addr) }
//	msg, _ := http1.AppendRequest(nil, http1.RequestLine{Method: "POST", Host: host, Path: "/v1/x"}, hdr, body)
//	nc.Write(msg)
//	h, body, err := http1.ReadResponse(nc) // err: IdleRace(reused, err) says "retry once"
//	io.Copy(dst, body)
//	if !h.Close && body.Done() { p.Put(addr, nc) } else { nc.Close() }
package http1
