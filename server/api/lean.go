package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/internal/http1"
)

// leanServer answers the router's POST /generate on its own connection code and hands
// every other connection to net/http (WithLeanGenerate). Why: net/http's server costs a
// worker, per request, a background read (a goroutine, a read that returns EAGAIN, its
// abort through two read-deadline changes and a wake-up), four more deadline changes,
// a bufio/textproto head parse into maps, and a context; at zero compute that is about
// what the rest of the request costs (docs/BENCHMARKS.md).
//
// Each connection has two goroutines for its whole life. The reader stays parked in
// Read between requests: it reads a head, and when it is one of the simple heads
// http1.ParseRequestHead accepts, for POST /generate with a body within the handler's
// limit, it reads the body and hands the request to the connection's server goroutine,
// then goes back to Read. So the read that net/http starts per request to see the peer
// go away is the one that waits for the next request: a Read that ends in EOF or an
// error cancels the connection's context, which is every request's context on it, and a
// cancelled leg becomes an engine abort even while decode writes nothing
// (TestLeanDroppedLegAborts). The server goroutine runs the handler with a leanWriter,
// which writes net/http's bytes. Any other head (another path or method, a malformed
// or unusual one, a body over the limit), or a request the peer half-closed unfinished
// with nothing in hand, hands the connection, with the bytes already read, to net/http,
// which answers it and every later request on it as before: its errors and its 4xx
// bodies are unchanged.
//
// Timeouts without per-request deadlines: a reaper closes connections idle past the
// idle timeout, or stuck in a head or a body past the read-header or read timeout.
// Write deadlines are the handler's (its write guard), cleared after the response.
type leanServer struct {
	h     *Handler
	hand  *handoff
	log   *slog.Logger
	paths []string // the POST paths answered here

	idle, headerTimeout, readTimeout time.Duration

	closing atomic.Bool
	dates   atomic.Pointer[dateCache]

	mu    sync.Mutex
	ln    net.Listener
	conns map[*leanConn]struct{}

	// Closed when no connection is left to reap: not when accepting ends, since a
	// shutdown waits for connections the timeouts still bound.
	reaped   chan struct{}
	stopReap sync.Once
}

func newLeanServer(h *Handler, srv *http.Server, log *slog.Logger, paths []string) *leanServer {
	return &leanServer{h: h, log: log, paths: paths, idle: srv.IdleTimeout, headerTimeout: srv.ReadHeaderTimeout,
		readTimeout: srv.ReadTimeout, conns: map[*leanConn]struct{}{}, reaped: make(chan struct{})}
}

// serve accepts connections on ln until it is closed; nil after a shutdown.
func (s *leanServer) serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	closing := s.closing.Load()
	s.mu.Unlock()
	if closing { // shut down before it served
		_ = ln.Close()
		return nil
	}
	go s.reap()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// EMFILE and the like: wait and try again, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("api: accept failed; retrying", "err", err, "in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		c := s.newConn(nc)
		if !s.track(c) {
			nc.Close()
			continue
		}
		go c.serveLoop()
	}
}

func (s *leanServer) track(c *leanConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *leanServer) untrack(c *leanConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// stopAccepting closes the listener and makes every response the last on its
// connection.
func (s *leanServer) stopAccepting() {
	s.mu.Lock()
	s.closing.Store(true)
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
}

// shutdown waits, closing idle connections as they become idle, until none is left or
// ctx ends (net/http's Shutdown for these connections).
func (s *leanServer) shutdown(ctx context.Context) error {
	s.stopAccepting()
	wait := time.Millisecond
	for {
		if s.closeIdle() == 0 {
			s.stopReap.Do(func() { close(s.reaped) })
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// closeIdle closes the connections with no request in hand and returns how many are
// left open.
func (s *leanServer) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.idle() {
			_ = c.nc.Close()
		}
	}
	return len(s.conns)
}

// closeAll closes every connection.
func (s *leanServer) closeAll() {
	s.stopAccepting()
	s.stopReap.Do(func() { close(s.reaped) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
}

// reap closes connections past their idle, read-header or read timeout.
func (s *leanServer) reap() {
	every := time.Second
	for _, d := range []time.Duration{s.idle, s.headerTimeout, s.readTimeout} {
		if d > 0 {
			every = min(every, max(d/4, 10*time.Millisecond))
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.reaped:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		s.mu.Lock()
		for c := range s.conns {
			if d := s.limit(c); d > 0 && now-c.since.Load() > int64(d) {
				_ = c.nc.Close()
			}
		}
		s.mu.Unlock()
	}
}

// limit is the timeout that applies to c now (0: none).
// While a response is in progress, a next request's bytes wait as in net/http, which
// starts reading (and timing) them when that response ends: the timeouts are the next
// request's, not a reason to cut the response (serveLoop restarts since at its end).
func (s *leanServer) limit(c *leanConn) time.Duration {
	if c.pending.Load() != 0 {
		return 0
	}
	switch c.state.Load() {
	case readHead:
		return cmpOr(s.headerTimeout, s.readTimeout)
	case readBody:
		return s.readTimeout
	case readIdle:
		return cmpOr(s.idle, s.readTimeout)
	}
	return 0
}

func cmpOr(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// The reader's states, for the reaper.
const (
	readIdle = iota // waiting for a request's first byte
	readHead        // a head has begun
	readBody        // reading a body
	readWait        // a request read whole waits for the server goroutine: no timeout (net/http would not have read it yet)
	readDone        // the reader has ended
)

// leanConn is one connection of the lean server.
type leanConn struct {
	s      *leanServer
	nc     net.Conn
	tmpl   *http.Request // carries the connection's context into every request
	cancel context.CancelFunc
	reqs   chan leanItem // reader → server goroutine
	sdone  chan struct{} // the server goroutine has ended

	buf []byte // the reader's; bytes [0,n) are read and not yet used
	n   int

	// The server goroutine's.
	bw     *bufio.Writer // the connection's 4 KiB buffer (net/http's bufw)
	body   *bufio.Writer // the response body's 2 KiB buffer (net/http's w.w)
	hdrBuf bytes.Buffer
	rhdr   http.Header // the response header map, cleared per request
	werr   error

	born    time.Time
	used    atomic.Bool // a byte was read
	state   atomic.Int32
	since   atomic.Int64 // when the state began (or the last response ended)
	pending atomic.Int32 // requests handed to the server goroutine and not yet answered
}

// leanItem is a request for the server goroutine, or the hand-off of the connection to
// net/http with the bytes already read.
type leanItem struct {
	r        *http.Request
	close    bool
	handover []byte
}

func (s *leanServer) newConn(nc net.Conn) *leanConn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &leanConn{s: s, nc: nc, cancel: cancel, reqs: make(chan leanItem, 1), sdone: make(chan struct{}),
		buf: make([]byte, 1<<10), rhdr: http.Header{}, born: time.Now()}
	c.tmpl = (&http.Request{RemoteAddr: nc.RemoteAddr().String()}).WithContext(ctx)
	c.bw = bufio.NewWriterSize(connWriter{c}, 4<<10)
	c.body = bufio.NewWriterSize(chunks{}, bufferBeforeChunking)
	c.touch(readIdle)
	return c
}

func (c *leanConn) touch(state int32) {
	c.state.Store(state)
	c.since.Store(time.Now().UnixNano())
}

// idle reports that c has no request in hand. One that has read nothing yet is idle only
// after newConnGrace, as in net/http (its issue 22682): its first request may be on its
// way, and a close then is, to the client, a request lost rather than the 503 of a drain.
func (c *leanConn) idle() bool {
	if c.pending.Load() != 0 || c.state.Load() != readIdle {
		return false
	}
	return c.used.Load() || time.Since(c.born) > newConnGrace
}

// newConnGrace is net/http's: how long a shutdown spares a connection that sent nothing.
const newConnGrace = 5 * time.Second

// serveLoop is the connection's server goroutine: it starts the reader, then answers
// what the reader hands it, in order.
func (c *leanConn) serveLoop() {
	go c.read()
	defer c.s.untrack(c)
	defer close(c.sdone)
	for it := range c.reqs {
		if it.handover != nil {
			c.cancel() // no request of this server is left on it
			c.s.hand.push(&prefixConn{Conn: c.nc, pre: it.handover})
			return
		}
		again := c.serveOne(it)
		// The idle time starts now, before the reaper may see no request pending: else it
		// measures it from the request's start and may close the connection as it is reused.
		c.since.Store(time.Now().UnixNano())
		c.pending.Add(-1)
		if !again {
			break
		}
	}
	_ = c.nc.Close()
}

// serveOne answers one request; false when the connection must end.
func (c *leanConn) serveOne(it leanItem) (again bool) {
	clear(c.rhdr)
	w := &leanWriter{c: c, hdr: c.rhdr, length: -1, wantsClose: it.close, body: c.body}
	c.body.Reset(chunks{w})
	defer func() {
		if err := recover(); err != nil {
			if err != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.log.Error("api: panic serving", "remote", it.r.RemoteAddr, "err", err, "stack", string(buf))
			}
			again = false
		}
	}()
	c.s.h.ServeHTTP(w, it.r)
	err := w.finish()
	if w.deadline {
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
	return err == nil && !w.closeAfter && !c.s.closing.Load()
}

// read is the connection's reader (see leanServer).
func (c *leanConn) read() {
	handedOver := false
	defer func() {
		c.state.Store(readDone)
		if !handedOver { // (a hand-off leaves a request still being answered alone)
			c.cancel() // the peer went away, or the connection ended: every request on it is over
		}
		close(c.reqs)
	}()
	crlf := 0 // leading CR or LF bytes the next head may still drop (see headEnd)
	for {
		end := c.headEnd(&crlf)
		for end < 0 {
			if c.n == len(c.buf) {
				if len(c.buf) >= http1.MaxSimpleHead {
					handedOver = c.handover()
					return
				}
				c.buf = append(c.buf, make([]byte, len(c.buf))...)
			}
			m, err := c.nc.Read(c.buf[c.n:])
			if m > 0 && c.n == 0 {
				c.touch(readHead)
				if !c.used.Load() {
					c.used.Store(true)
				}
			}
			c.n += m
			if end = c.headEnd(&crlf); end < 0 && err != nil {
				if c.halfClosed(err) && c.n > 0 { // net/http answers the cut head
					handedOver = c.handover()
				}
				return
			}
		}
		it, next := c.request(end)
		switch next {
		case toNetHTTP:
			handedOver = c.handover()
			return
		case endConn:
			return
		}
		crlf = 4
		c.pending.Add(1) // before the hand-off: never idle in between (shutdown closes idle ones)
		c.state.Store(readWait)
		select {
		case c.reqs <- it:
		case <-c.sdone:
			return
		}
		if c.n == 0 {
			c.touch(readIdle)
		} else {
			c.touch(readHead)
		}
	}
}

// headEnd is http1.RequestHeadEnd of the buffer once up to *crlf leading CR or LF bytes
// are dropped: net/http drops up to 4 after a POST (RFC 9112 2.2, for clients that end a
// body with a stray CRLF), and every request here is a POST. Without it the stray CRLF
// reads as an empty head, net/http is handed a malformed request and answers 400.
func (c *leanConn) headEnd(crlf *int) int {
	i := 0
	for i < *crlf && i < c.n && (c.buf[i] == '\r' || c.buf[i] == '\n') {
		i++
	}
	if i < c.n {
		*crlf = 0 // the head has begun
	} else {
		*crlf -= i
	}
	if i > 0 {
		if c.n = copy(c.buf, c.buf[i:c.n]); c.n == 0 {
			c.touch(readIdle) // no head yet: still the idle timeout
		}
	}
	return http1.RequestHeadEnd(c.buf[:c.n])
}

// halfClosed reports a read that ended in EOF with no request of the connection in
// hand: what was read of the next one is then net/http's to answer, as it would have
// (a peer that half-closes still reads). With requests in hand, EOF cancels them instead
// (the peer went away: see leanServer).
func (c *leanConn) halfClosed(err error) bool {
	return errors.Is(err, io.EOF) && c.pending.Load() == 0
}

// What the reader does with a head.
const (
	serveLean = iota
	toNetHTTP // a request net/http is to answer (buf[:n] holds what was read of it)
	endConn   // its body could not be read
)

// minBodyBuf is the least a body's buffer starts with when its bytes are still to come.
const minBodyBuf = 64 << 10

// request parses the head in buf[:end] and reads its body.
func (c *leanConn) request(end int) (leanItem, int) {
	head := string(c.buf[:end])
	var hdr http.Header
	var vals []string
	hd, ok := http1.ParseRequestHead(head, func(name, value string) {
		if len(name) == 4 && http1.EqualFold([]byte(name), "Host") {
			return
		}
		if hdr == nil {
			// The fields but Host: the lines less the request line, the blank one and
			// Host (exactly one in an accepted head). The router's seven fit a map's
			// smallest table; a larger hint would double it.
			n := max(bytes.Count(c.buf[:end], []byte("\n"))-3, 1)
			hdr, vals = make(http.Header, n), make([]string, 0, n)
		}
		k := http.CanonicalHeaderKey(name)
		if old, dup := hdr[k]; dup {
			hdr[k] = append(old, value)
			return
		}
		vals = append(vals, value)
		hdr[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	})
	if !ok || hd.Method != http.MethodPost || !slices.Contains(c.s.paths, hd.Target) || hd.ContentLength > c.s.h.maxBody {
		return leanItem{}, toNetHTTP
	}
	if hdr == nil {
		hdr = http.Header{}
	}
	// The body grows as its bytes come, as net/http's does: a head alone must not cost
	// the body it announces (a peer's heads would hold the limit each until timed out).
	want := int(hd.ContentLength)
	k := min(c.n-end, want)
	body := make([]byte, k, min(want, max(k, minBodyBuf)))
	copy(body, c.buf[end:end+k])
	c.n = copy(c.buf, c.buf[end+k:c.n])
	if k < want {
		c.touch(readBody)
		for len(body) < want {
			if len(body) == cap(body) {
				body = slices.Grow(body, min(len(body), want-len(body)))
			}
			m, err := c.nc.Read(body[len(body):min(cap(body), want)])
			body = body[:len(body)+m]
			if err != nil && len(body) < want {
				if !c.halfClosed(err) {
					return leanItem{}, endConn
				}
				// net/http answers the short body (its handler's 400).
				c.buf = append(append(c.buf[:0], head...), body...)
				c.n = len(c.buf)
				return leanItem{}, toNetHTTP
			}
		}
	}
	r := new(http.Request)
	*r = *c.tmpl
	r.Method, r.URL, r.RequestURI = http.MethodPost, &url.URL{Path: hd.Target}, hd.Target
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	r.Header, r.Host, r.ContentLength, r.Close = hdr, hd.Host, hd.ContentLength, hd.Close
	if len(body) == 0 {
		r.Body = http.NoBody
	} else {
		r.Body = &leanBody{b: body, Reader: bytes.NewReader(body)}
	}
	return leanItem{r: r, close: hd.Close}, serveLean
}

// handover gives the connection to net/http, with the bytes read so far, once the
// server goroutine has answered what it was handed before; false when it has ended.
func (c *leanConn) handover() bool {
	pre := bytes.Clone(c.buf[:c.n])
	if pre == nil {
		pre = []byte{}
	}
	c.state.Store(readWait)
	select {
	case c.reqs <- leanItem{handover: pre}:
		return true
	case <-c.sdone:
		return false
	}
}

// leanBody is a request body read whole (within the handler's limit).
type leanBody struct {
	b []byte
	*bytes.Reader
}

func (*leanBody) Close() error { return nil }

// whole returns the body's bytes when nothing has been read of it yet, and marks it
// read: the handler's readBody need not copy what the reader already holds.
func (l *leanBody) whole() ([]byte, bool) {
	if l.Len() != len(l.b) {
		return nil, false
	}
	_, _ = l.Seek(0, io.SeekEnd)
	return l.b, true
}
