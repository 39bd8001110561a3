package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"pdsoak/ledger"
)

// h1 is the client's own HTTP/1.1 transport for plain http:// targets. net/http's
// Transport runs two goroutines per connection (readLoop, writeLoop) and hands every
// read and write between them and the caller; at thousands of held streams that is
// three stacks per stream and a scheduler hop per chunk (the profiles of issue 11:
// stack growth, dials and goroutine handoffs dominate the harness's CPU and memory).
// Here the request's own goroutine dials, writes and reads: no goroutine per
// connection, and cancellation is a deadline set on the socket by context.AfterFunc.
type h1 struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	addr        string // host:port to dial
	host        string // Host header
	prefix      string // path prefix of the base URL
	maxIdle     int
	idleTimeout time.Duration

	mu   sync.Mutex
	idle []idleConn // most recently used last
}

// newH1 returns the transport for base (an http:// URL), dialling through tr.
func newH1(base string, tr *http.Transport) (*h1, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("client: base URL %q: %w", base, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q has no host", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	t := &h1{addr: addr, host: u.Host, prefix: strings.TrimRight(u.EscapedPath(), "/"),
		maxIdle: DefaultMaxIdleConns, idleTimeout: 90 * time.Second}
	t.dial = (&net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	if tr != nil {
		if tr.DialContext != nil {
			t.dial = tr.DialContext
		}
		if tr.MaxIdleConnsPerHost > 0 {
			t.maxIdle = tr.MaxIdleConnsPerHost
		}
		if tr.IdleConnTimeout > 0 {
			t.idleTimeout = tr.IdleConnTimeout
		}
	}
	return t, nil
}

// h1Conn is one request's use of a connection (a fresh one per request, so that a late
// abort of a finished request can never reach the connection's next owner).
type h1Conn struct {
	t      *h1
	nc     net.Conn
	reused bool

	mu      sync.Mutex
	done    bool // the request let go of the connection
	aborted bool // a cancellation set the socket's deadline in the past
}

// idleConn is a pooled connection.
type idleConn struct {
	nc    net.Conn
	since time.Time
}

// errInvalidHeader marks a request the client refuses to put on the wire (a transport
// error, as net/http reports it).
var errInvalidHeader = errors.New("client: invalid header")

// abort unblocks the owner's read or write; the owner then closes the connection.
func (pc *h1Conn) abort() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.done {
		pc.aborted = true
		pc.nc.SetDeadline(time.Unix(1, 0))
	}
}

// get returns an idle connection that is still open, or dials a new one. Either way the
// request's cancellation aborts it from then on.
func (t *h1) get(ctx context.Context, st *reqState) (*h1Conn, error) {
	now := time.Now()
	var nc net.Conn
	reused := false
	for nc == nil {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		ic := t.idle[n-1]
		t.idle[n-1] = idleConn{}
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if now.Sub(ic.since) < t.idleTimeout && alive(ic.nc) {
			nc, reused = ic.nc, true
		} else {
			ic.nc.Close()
		}
	}
	if nc == nil {
		// A dial context of its own (values kept): cancelling the request cancels it,
		// and nothing stays registered on the request's context after the dial.
		dctx, dcancel := context.WithCancel(context.WithoutCancel(ctx))
		st.setAbort(dcancel)
		if ctx.Err() != nil {
			dcancel()
		}
		var err error
		nc, err = t.dial(dctx, "tcp", t.addr)
		st.setAbort(nil)
		dcancel()
		if err != nil {
			return nil, err
		}
	}
	pc := &h1Conn{t: t, nc: nc, reused: reused}
	st.setAbort(pc.abort)
	if ctx.Err() != nil {
		pc.abort()
	}
	return pc, nil
}

// put returns a connection whose response was read to its end to the pool, and closes
// the pooled connections idle for longer than the idle timeout (the pool is a stack:
// after a burst the connections at its bottom would otherwise stay open for the run).
func (t *h1) put(nc net.Conn) {
	now := time.Now()
	var stale []net.Conn
	t.mu.Lock()
	for len(t.idle) > 0 && now.Sub(t.idle[0].since) >= t.idleTimeout {
		stale = append(stale, t.idle[0].nc)
		t.idle[0] = idleConn{}
		t.idle = t.idle[1:]
	}
	if len(t.idle) >= t.maxIdle {
		stale = append(stale, nc)
	} else {
		t.idle = append(t.idle, idleConn{nc: nc, since: now})
	}
	t.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// closeIdle closes the pooled connections.
func (t *h1) closeIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, ic := range idle {
		ic.nc.Close()
	}
}

// roundTrip sends one POST and reads the response head. wrote runs once the request is
// on the wire (the end of the connect phase). On success the caller owns pc and ends it
// with finish.
func (t *h1) roundTrip(ctx context.Context, st *reqState, req *Request, path string, body []byte, wrote func()) (*h1Conn, respHead, *h1Body, error) {
	msg, err := t.appendHead(make([]byte, 0, 256+len(req.ID)+len(body)), req, path, len(body))
	if err != nil {
		return nil, respHead{}, nil, err
	}
	msg = append(msg, body...) // one write, one segment
	for attempt := 0; ; attempt++ {
		pc, err := t.get(ctx, st)
		if err != nil {
			return nil, respHead{}, nil, err
		}
		n, err := pc.nc.Write(msg)
		if err != nil {
			pc.release(st)
			pc.nc.Close()
			// A pooled connection the server closed in the instant after the liveness
			// check: nothing reached the server, so a fresh connection may carry it.
			if pc.reused && n == 0 && attempt == 0 && ctx.Err() == nil {
				continue
			}
			return nil, respHead{}, nil, err
		}
		wrote()
		h, rb, err := readResponse(pc.nc)
		if err != nil {
			pc.release(st)
			pc.nc.Close()
			return nil, respHead{}, nil, err
		}
		return pc, h, rb, nil
	}
}

// release ends the request's hold on pc and reports whether a cancellation aborted it.
func (pc *h1Conn) release(st *reqState) (aborted bool) {
	st.setAbort(nil)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.done = true
	return pc.aborted
}

// finish ends a request's use of pc: back to the pool when body reached its end, the
// server keeps the connection and no cancellation touched the socket; closed otherwise.
func (pc *h1Conn) finish(st *reqState, h respHead, body *h1Body) {
	if pc.release(st) || h.close || !body.done() {
		pc.nc.Close()
		return
	}
	pc.t.put(pc.nc)
}

// appendHead appends the request line and headers.
func (t *h1) appendHead(b []byte, req *Request, path string, n int) ([]byte, error) {
	b = append(b, "POST "...)
	b = append(b, t.prefix...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.host...)
	b = append(b, "\r\nUser-Agent: pdsoak-harness\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	if req.Stream {
		b = append(b, "\r\nAccept: text/event-stream"...)
	} else {
		b = append(b, "\r\nAccept: application/json"...)
	}
	if !validHeaderValue(req.ID) {
		return b, fmt.Errorf("%w: X-Request-ID %q", errInvalidHeader, req.ID)
	}
	b = append(b, "\r\nX-Request-Id: "...)
	b = append(b, req.ID...)
	for k, vs := range req.Header {
		ck := http.CanonicalHeaderKey(k)
		switch ck {
		case "Host", "Content-Length", "Content-Type", "Accept", "X-Request-Id", "Transfer-Encoding", "Connection":
			continue // set above, as the net/http path does, or framing the client owns
		}
		if !validHeaderName(k) {
			return b, fmt.Errorf("%w: name %q", errInvalidHeader, k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return b, fmt.Errorf("%w: value of %q", errInvalidHeader, k)
			}
			b = append(b, "\r\n"...)
			b = append(b, ck...)
			b = append(b, ": "...)
			b = append(b, v...)
		}
	}
	return append(b, "\r\n\r\n"...), nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

// drainH1 reads what is left of a finished body for at most grace, so the connection
// can be reused (anything after [DONE] is ignored).
func drainH1(pc *h1Conn, body io.Reader, grace time.Duration) {
	pc.nc.SetReadDeadline(time.Now().Add(grace))
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 256<<10))
	pc.nc.SetReadDeadline(time.Time{})
}

// doH1 is Do's body on the h1 transport; it classifies exactly as the net/http path:
// the same phases, timers, readers and rules, only the bytes move differently.
func (c *Client) doH1(ctx context.Context, req *Request, res *Result, st *reqState, obs Observer, path string, body []byte) *Result {
	pc, h, rb, err := c.h1.roundTrip(ctx, st, req, path, body, func() {
		st.advance(phBeforeHeaders)
		if st.connect != nil {
			st.connect.Stop()
			st.connect = nil // this goroutine is the only reader; a spent timer need not stay
		}
	})
	if err != nil {
		return c.classifyErr(ctx, res, st, err)
	}
	cb := &countingReader{r: rb}
	defer func() { res.Bytes = cb.n }()
	defer func() { pc.finish(st, h, rb) }()
	st.advance(phBeforeFirstToken)
	res.Headers = c.now()
	res.Status = h.status
	if obs != nil {
		obs.Headers(req, res.Headers, h.status)
	}
	if h.status < 200 || h.status > 299 {
		return c.refusedH1(res, &h, cb)
	}
	if !req.Stream {
		return c.readWhole(ctx, req, res, st, cb, obs)
	}
	if ct := h.contentType; !isEventStream(ct) {
		return c.finish(res, ledger.OutcomeInvalid, "", fmt.Errorf("client: stream requested, answer is %q, not text/event-stream", ct))
	}
	if st.connect != nil {
		st.connect.Stop()
	}
	if req.Deadlines.Stall > 0 {
		st.stall = time.AfterFunc(req.Deadlines.Stall, c.fire(req, st, obs, ErrStallDeadline, "stall", nil))
	}
	res = c.readStream(ctx, req, res, st, h1Stream{cb, rb}, obs)
	if res.Outcome == ledger.OutcomeOK {
		st.stop()
		drainH1(pc, cb, c.drainGrace)
	}
	return res
}

// refusedH1 classifies a non-2xx answer as refused does (a frame of its own: the
// response it builds is not kept on every stream's stack).
//
//go:noinline
func (c *Client) refusedH1(res *Result, h *respHead, body io.Reader) *Result {
	resp := &http.Response{StatusCode: h.status, Header: http.Header{}}
	if h.retryAfter != "" {
		resp.Header.Set("Retry-After", h.retryAfter)
	}
	return c.refused(res, resp, body)
}
