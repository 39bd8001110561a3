package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"pdsoak/internal/http1"
)

// legClient posts /generate to workers over HTTP/1.1 keep-alive connections, on the
// project's one HTTP/1.1 wire (pdsoak/internal/http1: pool, liveness peek, request
// writer, head parser, body framing), and reads the response in the calling goroutine.
// net/http's client hands every request to a per-connection writer goroutine and every
// response from a per-connection reader goroutine; on the router's request path those
// hand-offs, and their allocations, cost more CPU than the work itself
// (BenchmarkRouterZeroTime's profile). Everything a leg needs is bounded as before: the
// dial by the connect timeout, every read and write by the leg's context (cancelling it
// closes the connection, so the worker sees the request end), and the read of the
// stream's end by legDrainTimeout.
type legClient struct {
	dialTimeout time.Duration
	pool        *http1.Pool
}

// Bounds of the leg client.
const (
	// legIdleTimeout closes pooled connections idle this long (below the workers' own
	// idle timeout, so the router is the side that closes).
	legIdleTimeout = 90 * time.Second
	// legMaxIdlePerHost bounds the pool per worker.
	legMaxIdlePerHost = 512
	// legDrainTimeout bounds the read of a stream's end after its done event (the
	// terminating chunk, normally in the same segment); past it the connection is
	// closed instead of reused.
	legDrainTimeout = 100 * time.Millisecond
)

func newLegClient(dialTimeout time.Duration) *legClient {
	return &legClient{dialTimeout: dialTimeout, pool: http1.NewPool(http1.WithIdleTimeout(legIdleTimeout),
		http1.WithMaxIdle(legMaxIdlePerHost))}
}

// legConn is one leg's use of a connection.
type legConn struct {
	net.Conn
	addr   string
	reused bool
}

// legTarget is where a worker's /generate is: host:port and the request line's path.
type legTarget struct {
	addr, host, path string
}

// parseLegTarget returns the target of base's /generate; ok is false for a URL the leg
// client does not serve (https), which then goes through net/http.
func parseLegTarget(base string) (legTarget, bool) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return legTarget{}, false
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return legTarget{addr: addr, host: u.Host, path: u.EscapedPath() + "/generate"}, true
}

// get returns an idle pooled connection to addr, or a new one (always a new one when
// fresh is set). The pool peeks at every connection before it is reused, so one the
// worker closed (it restarted) is found before the request is written: a failure while
// reading the answer is not retried (retryable), so the peek is what keeps a restarted
// worker's stale connections from failing requests. It costs one recvfrom per leg.
func (lc *legClient) get(ctx context.Context, addr string, fresh bool) (*legConn, error) {
	if !fresh {
		if nc := lc.pool.Get(addr); nc != nil {
			return &legConn{Conn: nc, addr: addr, reused: true}, nil
		}
	}
	if lc.pool.Closed() {
		return nil, errors.New("router: closed")
	}
	d := net.Dialer{Timeout: lc.dialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &legConn{Conn: nc, addr: addr}, nil
}

// put returns a connection whose response was read to its end.
func (lc *legClient) put(c *legConn) {
	if c.SetDeadline(time.Time{}) != nil {
		c.Close()
		return
	}
	lc.pool.Put(c.addr, c.Conn)
}

// reap closes connections idle longer than the idle timeout.
func (lc *legClient) reap() { lc.pool.Reap() }

// dropIdle closes the idle connections to addr: one was found closed by the worker, so
// the others (as old, or older) most likely are too (it restarted).
func (lc *legClient) dropIdle(addr string) { lc.pool.DropIdle(addr) }

// close closes every idle connection; connections in use are closed when their leg ends.
func (lc *legClient) close() { lc.pool.Close() }

// aLongTimeAgo is a deadline that makes every blocked read and write return at once.
var aLongTimeAgo = time.Unix(1, 0)

// legResponse is a worker's answer to one /generate: its status and its body, which the
// caller reads, then ends with finish.
type legResponse struct {
	StatusCode int
	Body       io.Reader
	c          *legConn
	head       http1.Head
	body       *http1.Body
	stop       func() bool
	lc         *legClient
	detached   bool
	live       bool // the context had not ended when detach stopped watching it
}

// detach stops tying the connection to the leg's context; false when the context had
// already ended (and spoiled the connection's deadline). Idempotent.
func (r *legResponse) detach() bool {
	if !r.detached {
		r.detached, r.live = true, r.stop()
	}
	return r.live
}

// legCall is a /generate request written to a worker whose answer is still to be read.
type legCall struct {
	lc        *legClient
	ctx       context.Context
	t         legTarget
	body      []byte
	rid       string
	c         *legConn
	stop      func() bool // stops the context from closing c
	attempted int
}

// begin writes body to t's /generate on a pooled connection, without waiting for the
// answer (the router writes both legs before reading either). The call must be ended by
// response, whose result must be ended with finish.
func (lc *legClient) begin(ctx context.Context, t legTarget, body []byte, rid string) (*legCall, error) {
	call := &legCall{lc: lc, ctx: ctx, t: t, body: body, rid: rid}
	if err := call.write(); err != nil {
		return nil, err
	}
	return call, nil
}

// retryable reports whether a failed write of the request allows one more try on a
// fresh connection: the socket refused it (reset, broken pipe) on a reused connection
// the worker had closed, so nothing reached its handler. Once. A failure while reading
// the answer is never retried, whatever it looks like: the worker (or a proxy between)
// may have read the request and then lost the connection, and a second copy would give
// it the same bootstrap room twice (TestLegNeverSentTwice). Such a leg fails as a
// transport failure, which the flow may retry on a new room.
func (call *legCall) retryable(err error) bool {
	return http1.IdleRace(call.c.reused, err) && call.attempted == 1 && call.ctx.Err() == nil
}

func (call *legCall) write() error {
	for {
		// A retry dials: the pool's other connections are as stale as the one that failed.
		c, err := call.lc.get(call.ctx, call.t.addr, call.attempted > 0)
		if err != nil {
			return call.ctxErr(err)
		}
		call.c, call.attempted = c, call.attempted+1
		call.stop = context.AfterFunc(call.ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
		err = call.send()
		if err == nil {
			return nil
		}
		call.stop()
		c.Close()
		if !call.retryable(err) {
			return call.ctxErr(err)
		}
		call.lc.dropIdle(call.t.addr)
	}
}

func (call *legCall) ctxErr(err error) error {
	if call.ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", context.Cause(call.ctx), err)
	}
	return err
}

func (call *legCall) send() error {
	t, rid := call.t, call.rid
	if !http1.ValidHeaderValue(rid) {
		rid = "" // an id the wire cannot carry is left off, not a failed leg
	}
	req, err := http1.AppendRequest(make([]byte, 0, 192+len(t.host)+len(t.path)+len(rid)+len(call.body)), &http1.Request{
		Method: "POST", Host: t.host, Path: t.path, UserAgent: "pdsoak-router",
		ContentType: "application/json", Accept: "text/event-stream", RequestID: rid, TraceParent: traceParent(call.ctx), Body: call.body})
	if err != nil {
		return err
	}
	if _, err := call.c.Write(req); err != nil {
		return http1.WriteError(err) // a reset: the worker had closed it, nothing reached its handler
	}
	return nil
}

// response waits for the worker's answer (bounded by the call's context) and reads its
// status line and headers.
func (call *legCall) response() (*legResponse, error) {
	c := call.c
	h, body, err := http1.ReadResponsePooled(c.Conn) // two a request, none held: pooled
	if err == nil {
		return &legResponse{StatusCode: h.Status, Body: body, c: c, head: h, body: body, stop: call.stop, lc: call.lc}, nil
	}
	call.stop()
	c.Close()
	if c.reused && errors.Is(err, http1.ErrNoResponse) {
		call.lc.dropIdle(call.t.addr) // the others to this worker are most likely as dead (it restarted)
	}
	return nil, call.ctxErr(err) // never re-sent: the worker may have the request (retryable)
}

// finish ends the response. complete says the caller read the whole answer it wanted
// (the done event, or an error body): the connection is then drained to the end of the
// response, within legDrainTimeout, and pooled. Otherwise it is closed, which is how the
// worker learns that the leg was cancelled.
func (r *legResponse) finish(complete bool) {
	if !r.detach() { // the leg's context ended: the connection's deadline is spoiled
		complete = false
	}
	if complete && !r.head.Close && r.body.Drain(legDrainTimeout, 64<<10) {
		r.lc.put(r.c)
		return
	}
	r.c.Close()
}
