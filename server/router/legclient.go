package router

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// legClient posts /generate to workers over HTTP/1.1 keep-alive connections it pools
// itself, and reads the response in the calling goroutine. net/http's client hands every
// request to a per-connection writer goroutine and every response from a per-connection
// reader goroutine; on the router's request path those hand-offs, and their allocations,
// cost more CPU than the work itself (BenchmarkRouterZeroTime's profile). Everything a
// leg needs is bounded as before: the dial by the connect timeout, every read and write
// by the leg's context (cancelling it closes the connection, so the worker sees the
// request end), and the read of the stream's end by legDrainTimeout.
type legClient struct {
	dialTimeout, idleTimeout time.Duration
	trustIdle                time.Duration // see legTrustIdle
	maxIdlePerHost           int

	mu     sync.Mutex
	idle   map[string][]*legConn
	closed bool
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
	// legTrustIdle is how long a connection may sit in the pool and still be reused
	// without first checking that the worker has not closed it.
	legTrustIdle = time.Second
)

func newLegClient(dialTimeout time.Duration) *legClient {
	return &legClient{dialTimeout: dialTimeout, idleTimeout: legIdleTimeout, trustIdle: legTrustIdle, maxIdlePerHost: legMaxIdlePerHost,
		idle: map[string][]*legConn{}}
}

// legConn is one pooled connection.
type legConn struct {
	net.Conn
	br        *bufio.Reader
	addr      string
	idleSince time.Time
	reused    bool
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
// fresh is set).
func (lc *legClient) get(ctx context.Context, addr string, fresh bool) (*legConn, error) {
	now := time.Now()
	lc.mu.Lock()
	for !fresh {
		list := lc.idle[addr]
		if len(list) == 0 {
			break
		}
		c := list[len(list)-1] // the most recently used: the warmest
		list[len(list)-1] = nil
		lc.idle[addr] = list[:len(list)-1]
		lc.mu.Unlock()
		// The peek costs a syscall; a connection that was in use a moment ago is taken
		// as is (if the worker closed it even so, the write or the answer fails before
		// the worker's handler saw anything, and the call is retried on a fresh one).
		if idle := now.Sub(c.idleSince); idle < lc.idleTimeout && (idle < lc.trustIdle || c.alive()) {
			c.reused = true
			return c, nil
		}
		c.Close()
		lc.mu.Lock()
	}
	closed := lc.closed
	lc.mu.Unlock()
	if closed {
		return nil, errors.New("router: closed")
	}
	d := net.Dialer{Timeout: lc.dialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &legConn{Conn: nc, br: bufio.NewReaderSize(nc, 4096), addr: addr}, nil
}

// put returns a connection whose response was read to its end.
func (lc *legClient) put(c *legConn) {
	if c.br.Buffered() > 0 || c.SetDeadline(time.Time{}) != nil {
		c.Close() // bytes nobody asked for: the connection is out of step
		return
	}
	c.idleSince = time.Now()
	lc.mu.Lock()
	if lc.closed || len(lc.idle[c.addr]) >= lc.maxIdlePerHost {
		lc.mu.Unlock()
		c.Close()
		return
	}
	lc.idle[c.addr] = append(lc.idle[c.addr], c)
	lc.mu.Unlock()
}

// reap closes connections idle longer than the idle timeout.
func (lc *legClient) reap() {
	now := time.Now()
	var old []*legConn
	lc.mu.Lock()
	for addr, list := range lc.idle {
		keep := list[:0]
		for _, c := range list {
			if now.Sub(c.idleSince) >= lc.idleTimeout {
				old = append(old, c)
			} else {
				keep = append(keep, c)
			}
		}
		clear(list[len(keep):])
		lc.idle[addr] = keep
	}
	lc.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
}

// dropIdle closes the idle connections to addr: one was found closed by the worker, so
// the others (as old, or older) most likely are too (it restarted).
func (lc *legClient) dropIdle(addr string) {
	lc.mu.Lock()
	list := lc.idle[addr]
	delete(lc.idle, addr)
	lc.mu.Unlock()
	for _, c := range list {
		c.Close()
	}
}

// close closes every idle connection; connections in use are closed when their leg ends.
func (lc *legClient) close() {
	lc.mu.Lock()
	lc.closed = true
	idle := lc.idle
	lc.idle = map[string][]*legConn{}
	lc.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.Close()
		}
	}
}

// aLongTimeAgo is a deadline that makes every blocked read and write return at once.
var aLongTimeAgo = time.Unix(1, 0)

// errNoResponse is a reused connection that ended before any byte of the response: the
// worker closed it (it restarted, or timed it out) while it was idle.
var errNoResponse = errors.New("router: worker closed the connection before answering")

// legResponse is a worker's answer to one /generate: its status and its body, which the
// caller reads, then ends with finish.
type legResponse struct {
	StatusCode int
	Body       io.Reader
	c          *legConn
	resp       *http.Response
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

// retryable reports whether err on c allows one more try on a fresh connection: a
// reused connection the worker had closed while it was idle, so that nothing reached
// its handler (net/http retries a request it never wrote the same way).
func (call *legCall) retryable(err error) bool {
	return errors.Is(err, errNoResponse) && call.c.reused && call.attempted == 1 && call.ctx.Err() == nil
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
	t, rid, body := call.t, call.rid, call.body
	req := make([]byte, 0, 192+len(t.host)+len(t.path)+len(rid)+len(body))
	req = append(req, "POST "...)
	req = append(req, t.path...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, t.host...)
	req = append(req, "\r\nUser-Agent: pdsoak-router\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"...)
	if rid != "" && validHeaderValue(rid) {
		req = append(req, "X-Request-ID: "...)
		req = append(req, rid...)
		req = append(req, "\r\n"...)
	}
	req = appendTraceparent(req, call.ctx)
	req = append(req, "Content-Length: "...)
	req = strconv.AppendInt(req, int64(len(body)), 10)
	req = append(req, "\r\n\r\n"...)
	req = append(req, body...)
	if _, err := call.c.Write(req); err != nil {
		if isReset(err) { // the worker had closed it: nothing reached its handler
			return fmt.Errorf("%w: %w", errNoResponse, err)
		}
		return err
	}
	return nil
}

// response waits for the worker's answer (bounded by the call's context) and reads its
// status line and headers.
func (call *legCall) response() (*legResponse, error) {
	for {
		c := call.c
		_, err := c.br.Peek(1)
		if err == nil {
			resp, rerr := http.ReadResponse(c.br, nil)
			if rerr == nil {
				return &legResponse{StatusCode: resp.StatusCode, Body: resp.Body, c: c, resp: resp, stop: call.stop, lc: call.lc}, nil
			}
			err = rerr
		} else if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			err = fmt.Errorf("%w: %w", errNoResponse, err)
		}
		call.stop()
		c.Close()
		if !call.retryable(err) {
			return nil, call.ctxErr(err)
		}
		call.lc.dropIdle(call.t.addr)
		if err := call.write(); err != nil {
			return nil, err
		}
	}
}

// finish ends the response. complete says the caller read the whole answer it wanted
// (the done event, or an error body): the connection is then drained to the end of the
// response, within legDrainTimeout, and pooled. Otherwise it is closed, which is how the
// worker learns that the leg was cancelled.
func (r *legResponse) finish(complete bool) {
	if !r.detach() { // the leg's context ended: the connection's deadline is spoiled
		complete = false
	}
	if complete && !r.resp.Close {
		_ = r.c.SetReadDeadline(time.Now().Add(legDrainTimeout))
		if _, err := io.Copy(io.Discard, io.LimitReader(r.resp.Body, 64<<10)); err == nil && r.drained() {
			r.lc.put(r.c)
			return
		}
	}
	r.c.Close()
}

// drained reports whether the body is at its end.
func (r *legResponse) drained() bool {
	var one [1]byte
	n, err := r.resp.Body.Read(one[:])
	return n == 0 && errors.Is(err, io.EOF)
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}
