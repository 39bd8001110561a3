package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"pdsoak/internal/http1"
	"pdsoak/ledger"
)

// h1 is the client's own HTTP/1.1 transport for plain http:// targets, on the shared
// wire of pdsoak/internal/http1. net/http's Transport runs two goroutines per connection
// (readLoop, writeLoop) and hands every read and write between them and the caller; at
// thousands of held streams that is three stacks per stream and a scheduler hop per
// chunk (the profiles of issue 11). Here the request's own goroutine dials, writes and
// reads: no goroutine per connection, and cancellation is a deadline set on the socket.
type h1 struct {
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	addr   string // host:port to dial
	host   string // Host header
	prefix string // path prefix of the base URL
	pool   *http1.Pool
	header http.Header // sent with every request (WithHeader)
}

// newH1 returns the transport for base (an http:// URL), dialling through tr.
func newH1(base string, tr *http.Transport, idleTimeout time.Duration) (*h1, error) {
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
	maxIdle := DefaultMaxIdleConns
	t := &h1{addr: addr, host: u.Host, prefix: strings.TrimRight(u.EscapedPath(), "/")}
	t.dial = (&net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	if tr != nil {
		if tr.DialContext != nil {
			t.dial = tr.DialContext
		}
		if tr.MaxIdleConnsPerHost > 0 {
			maxIdle = tr.MaxIdleConnsPerHost
		}
	}
	t.pool = http1.NewPool(http1.WithIdleTimeout(idleTimeout), http1.WithMaxIdle(maxIdle))
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

// abort unblocks the owner's read or write; the owner then closes the connection.
func (pc *h1Conn) abort() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.done {
		pc.aborted = true
		pc.nc.SetDeadline(time.Unix(1, 0))
	}
}

// get returns a live pooled connection (unless fresh is set) or dials a new one. Either
// way the request's cancellation aborts it from then on.
func (t *h1) get(ctx context.Context, st *reqState, fresh bool) (*h1Conn, error) {
	var nc net.Conn
	if !fresh {
		nc = t.pool.Get(t.addr)
	}
	reused := nc != nil
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

// closeIdle closes the pooled connections.
func (t *h1) closeIdle() { t.pool.CloseIdle() }

// roundTrip sends one POST and reads the response head. wrote runs once the request is
// on the wire (the end of the connect phase). On success the caller owns pc and ends it
// with finish. retries counts the re-sends after the idle keep-alive race: a reused
// connection the server had closed (reset on write, or its end before any response
// byte) is retried once on a fresh one; a fresh connection's failure, or one after any
// response byte, is the request's.
func (t *h1) roundTrip(ctx context.Context, st *reqState, req *Request, path string, body []byte, wrote func()) (pc *h1Conn, h http1.Head, rb *http1.Body, retries int, err error) {
	msg, err := http1.AppendRequest(make([]byte, 0, 256+len(req.ID)+len(body)), &http1.Request{
		Method: "POST", Host: t.host, Prefix: t.prefix, Path: path, UserAgent: "pdsoak-harness",
		ContentType: "application/json", Accept: accept(req.Stream), RequestID: req.ID, TraceParent: req.TraceParent, Defaults: t.header, Header: req.Header, Body: body})
	if err != nil {
		return nil, h, nil, 0, err
	}
	for {
		pc, err = t.get(ctx, st, retries > 0)
		if err != nil {
			return nil, h, nil, retries, err
		}
		if _, err = pc.nc.Write(msg); err == nil {
			wrote()
			h, rb, err = http1.ReadResponse(pc.nc)
			if err == nil {
				return pc, h, rb, retries, nil
			}
		} else {
			err = http1.WriteError(err)
		}
		pc.release(st)
		pc.nc.Close()
		if !http1.IdleRace(pc.reused, err) || retries > 0 || ctx.Err() != nil {
			return nil, h, nil, retries, err
		}
		retries++
	}
}

func accept(stream bool) string {
	if stream {
		return "text/event-stream"
	}
	return "application/json"
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
func (pc *h1Conn) finish(st *reqState, h *http1.Head, body *http1.Body) {
	if pc.release(st) || h.Close || !body.Done() {
		pc.nc.Close()
		return
	}
	pc.t.pool.Put(pc.t.addr, pc.nc)
}

// doH1 is Do's body on the h1 transport; after the head it takes the same step as the
// net/http path (afterHead): the same phases, timers, readers and rules.
func (c *Client) doH1(ctx context.Context, req *Request, res *Result, st *reqState, obs Observer, path string, body []byte) *Result {
	pc, h, rb, retries, err := c.h1.roundTrip(ctx, st, req, path, body, func() {
		st.advance(phBeforeHeaders) // the connect deadline is over
	})
	res.ConnRetry = retries
	if err != nil {
		return c.classifyErr(ctx, res, st, err)
	}
	cb := &countingReader{r: rb}
	defer func() { res.Bytes = cb.n }()
	defer pc.finish(st, &h, rb)
	hd := &head{status: h.Status, contentType: h.ContentType, contentEncoding: h.ContentEncoding, retryAfter: h.RetryAfter}
	res = c.afterHead(ctx, req, res, st, obs, hd, cb, rb)
	if res.Outcome == ledger.OutcomeOK && req.Stream {
		st.stop()
		rb.Drain(c.drainGrace, 256<<10)
	}
	return res
}
