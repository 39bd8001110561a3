package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/internal/http1"
	"pdsoak/ledger"
)

// Endpoints.
const (
	EndpointChat        = "chat"        // POST /v1/chat/completions
	EndpointCompletions = "completions" // POST /v1/completions
)

// Exported defaults for the options of New.
const (
	// DefaultConnectTimeout bounds one dial when the request sets no connect deadline.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultMaxBody bounds a non-stream response body and an error body.
	DefaultMaxBody int64 = 16 << 20
	// DefaultMaxIdleConns is the idle connection pool size per host.
	DefaultMaxIdleConns = 10000
	// DefaultInspectGrace is how long past the total deadline the hard context deadline
	// sits, leaving a DeadlineObserver time to inspect the server before cancellation.
	DefaultInspectGrace = 3 * time.Second
	// DefaultIdleTimeout is how long a pooled connection may sit idle and still be
	// reused: below uvicorn's 5 s (SGLang, vLLM) and nginx's 75 s.
	DefaultIdleTimeout = http1.DefaultIdleTimeout
	// DefaultDrainGrace bounds how long a finished stream's remaining bytes (usually just
	// the chunked terminator) are read so its connection can be reused.
	DefaultDrainGrace = 50 * time.Millisecond
)

// Deadline causes. They tell the classifier which bound fired.
var (
	ErrConnectDeadline    = errors.New("client: connect deadline exceeded")
	ErrFirstTokenDeadline = errors.New("client: first-token deadline exceeded")
	ErrStallDeadline      = errors.New("client: stall deadline exceeded")
	ErrTotalDeadline      = errors.New("client: total deadline exceeded")
	ErrClientCancel       = errors.New("client: cancelled on purpose after k tokens")
)

// Deadlines bound one request. Zero disables a bound; Total should always be set.
type Deadlines struct {
	Connect    time.Duration // dial and write the request
	FirstToken time.Duration // from send to the first content token (streaming only)
	Stall      time.Duration // silence between progress chunks, from headers on (streaming only)
	Total      time.Duration // the whole request, from send
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one request to send.
type Request struct {
	ID          string
	Endpoint    string // EndpointChat (default) or EndpointCompletions
	Model       string
	Messages    []Message // chat
	Prompt      string    // completions
	MaxTokens   int
	Temperature float64
	Stream      bool
	// Scheduled is when the request should have been sent; zero means now.
	Scheduled time.Time
	Deadlines Deadlines
	// CancelAfterTokens > 0 makes the client disconnect after that many content
	// chunks (a client-abort fault); the outcome is cancelled.
	CancelAfterTokens int
	// Header holds extra request headers.
	Header http.Header
	// TraceParent is the request's W3C traceparent header value (empty: none); a
	// Header entry of the same name wins.
	TraceParent string
}

// Result is the classified end of one request.
type Result struct {
	ID      string
	Outcome ledger.Outcome
	// Phase is set for stalled, deadline_exceeded and cancelled outcomes.
	Phase ledger.Phase
	// Deadline names the bound that fired: connect, first_token, stall or total.
	Deadline string
	Status   int
	// Err explains any outcome other than ok.
	Err        string
	RetryAfter string
	// Times; zero when the event did not happen.
	Scheduled, Sent, Headers, FirstToken, End time.Time
	// ITL holds the gaps between consecutive content chunks.
	ITL              []time.Duration
	Chunks           int
	Text             string
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	Bytes            int64
	// ConnRetry counts the re-sends on a fresh connection after what looked like the
	// idle keep-alive race (a reused connection that ended before any response byte;
	// http1.IdleRace). Recorded so a retry, and the duplicate it may be, is visible.
	ConnRetry int
}

// TTFT is the first content token's time from the schedule (0 when none).
func (r *Result) TTFT() time.Duration {
	if r.FirstToken.IsZero() {
		return 0
	}
	return r.FirstToken.Sub(r.Scheduled)
}

// E2E is the end's time from the schedule.
func (r *Result) E2E() time.Duration { return r.End.Sub(r.Scheduled) }

// Lag is how late the request was sent relative to its schedule.
func (r *Result) Lag() time.Duration { return r.Sent.Sub(r.Scheduled) }

// Age is how long the request had been outstanding (from send) when it ended.
func (r *Result) Age() time.Duration { return r.End.Sub(r.Sent) }

// Observer hears a request's progress. Calls come from the goroutine running Do,
// except none; implementations must be cheap. A nil Observer is allowed.
type Observer interface {
	Sent(req *Request, at time.Time)
	Headers(req *Request, at time.Time, status int)
	FirstToken(req *Request, at time.Time)
}

// Client sends requests to one base URL.
type Client struct {
	base      string
	transport *http.Transport
	hc        *http.Client
	h1        *h1 // http:// targets: the client's own HTTP/1.1 transport (h1.go)
	maxBody   int64
	now       func() time.Time
	// inspectGrace and drainGrace: see DefaultInspectGrace and DefaultDrainGrace.
	inspectGrace, drainGrace time.Duration
	// idleTimeout: a pooled connection idle longer is closed, not reused.
	idleTimeout time.Duration
	tls         *tls.Config
	// header is sent with every request (target.headers); a request's own Header
	// replaces same-named entries. Values are never logged or recorded.
	header http.Header
	// watch carries the end of a caller's context to its requests (watch.go).
	watch watch
}

// Option configures a Client.
type Option func(*Client)

// WithTransport replaces the transport (tests, benchmarks).
func WithTransport(t *http.Transport) Option { return func(c *Client) { c.transport = t } }

// WithMaxBody bounds non-stream and error bodies.
func WithMaxBody(n int64) Option { return func(c *Client) { c.maxBody = n } }

// WithInspectGrace sets how long a DeadlineObserver may inspect the server past the
// total deadline before the request is cancelled regardless (DefaultInspectGrace).
func WithInspectGrace(d time.Duration) Option { return func(c *Client) { c.inspectGrace = d } }

// WithDrainGrace bounds the read of a finished stream's leftover bytes (DefaultDrainGrace).
func WithDrainGrace(d time.Duration) Option { return func(c *Client) { c.drainGrace = d } }

// WithIdleTimeout sets how long a pooled connection may sit idle and still be reused
// (DefaultIdleTimeout, below uvicorn's 5 s, so the client is the side that closes).
func WithIdleTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.idleTimeout = d
		}
	}
}

// WithHeader sets headers sent with every request (an Authorization, a routing header);
// a request's own Header replaces same-named ones. The client never writes a value to
// any output; an invalid one fails the request naming the header only.
func WithHeader(h http.Header) Option { return func(c *Client) { c.header = h } }

// WithTLS sets the TLS configuration of https:// targets (a CA, a server name, or
// verification off for a test deployment).
func WithTLS(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg } }

// WithConnectTimeout sets the dial timeout of the default transport.
func WithConnectTimeout(d time.Duration) Option {
	return func(c *Client) {
		if c.transport != nil && d > 0 {
			c.transport.DialContext = (&net.Dialer{Timeout: d, KeepAlive: 30 * time.Second}).DialContext
		}
	}
}

// NewTransport returns the transport the client uses by default: a dial timeout, no
// global timeouts, no proxy, no compression (it would buffer streams), HTTP/1.1.
func NewTransport(connectTimeout time.Duration) *http.Transport {
	if connectTimeout <= 0 {
		connectTimeout = DefaultConnectTimeout
	}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: DefaultMaxIdleConns,
		IdleConnTimeout:     DefaultIdleTimeout,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		WriteBufferSize:     4 << 10,
		ReadBufferSize:      4 << 10,
	}
}

// New returns a Client for baseURL (scheme://host:port, optionally with a path
// prefix; "/v1/..." is appended).
func New(baseURL string, opts ...Option) (*Client, error) {
	if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
		return nil, fmt.Errorf("client: base URL %q must start with http:// or https://", baseURL)
	}
	c := &Client{
		base:      strings.TrimRight(baseURL, "/"),
		transport: NewTransport(DefaultConnectTimeout),
		maxBody:   DefaultMaxBody,
		now:       time.Now,

		inspectGrace: DefaultInspectGrace,
		drainGrace:   DefaultDrainGrace,
		idleTimeout:  DefaultIdleTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	c.transport.IdleConnTimeout = c.idleTimeout
	if c.tls != nil {
		c.transport.TLSClientConfig = c.tls
	}
	c.hc = &http.Client{
		Transport: c.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	if strings.HasPrefix(c.base, "http://") {
		h, err := newH1(c.base, c.transport, c.idleTimeout)
		if err != nil {
			return nil, err
		}
		h.header = c.header
		c.h1 = h
	}
	return c, nil
}

// BaseURL returns the target's base URL.
func (c *Client) BaseURL() string { return c.base }

// HTTPClient returns the underlying client (for auxiliary GETs such as /debug/requests).
func (c *Client) HTTPClient() *http.Client { return c.hc }

// CloseIdleConnections closes pooled idle connections.
func (c *Client) CloseIdleConnections() {
	c.transport.CloseIdleConnections()
	if c.h1 != nil {
		c.h1.closeIdle()
	}
}

type chatBody struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages,omitempty"`
	Prompt        *string        `json:"prompt,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Temperature   float64        `json:"temperature"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Body returns the JSON request body and the URL path for req.
func Body(req *Request) ([]byte, string, error) {
	b := chatBody{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Stream: req.Stream}
	if req.Stream {
		b.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	path := "/v1/chat/completions"
	switch req.Endpoint {
	case EndpointChat, "":
		b.Messages = req.Messages
	case EndpointCompletions:
		path = "/v1/completions"
		p := req.Prompt
		b.Prompt = &p
	default:
		return nil, "", fmt.Errorf("client: unknown endpoint %q", req.Endpoint)
	}
	data, err := json.Marshal(b)
	return data, path, err
}

// Phases as stored in reqState.phase.
const (
	phConnect int32 = iota
	phBeforeHeaders
	phBeforeFirstToken
	phMidStream
)

var phaseNames = [...]ledger.Phase{ledger.PhaseConnect, ledger.PhaseBeforeHeaders, ledger.PhaseBeforeFirstToken, ledger.PhaseMidStream}

// fired records the first deadline that fired and the phase the request was in then.
type fired struct {
	cause error
	name  string
	phase ledger.Phase
	done  chan struct{} // closed once the observer returned and the request was cancelled
}

// finishedSentinel marks a request whose result is final: no deadline may fire.
var finishedSentinel = &fired{}

// reqState tracks one request's progress for the deadline timer and the classifier.
// The timer runs on its own goroutine, so everything it reads is atomic.
type reqState struct {
	phase  atomic.Int32
	fired  atomic.Pointer[fired]
	cancel context.CancelCauseFunc
	dls    deadlines // the four deadlines on one timer (deadline.go)
	// abortMu guards abortFn: what unblocks the transport's I/O on cancellation (h1).
	abortMu sync.Mutex
	abortFn func()
	// hardEnd is inspectGrace past the total deadline (zero: no total deadline): a
	// deadline observer that hangs is cut off there.
	hardEnd time.Time
}

func (s *reqState) stop() { s.dls.stop() }

func (s *reqState) setAbort(f func()) {
	s.abortMu.Lock()
	s.abortFn = f
	s.abortMu.Unlock()
}

// runAbort unblocks the transport's I/O, if it registered a way to.
func (s *reqState) runAbort() {
	s.abortMu.Lock()
	f := s.abortFn
	s.abortMu.Unlock()
	if f != nil {
		f()
	}
}

// advance moves the phase forward (never back).
func (s *reqState) advance(p int32) {
	for {
		cur := s.phase.Load()
		if cur >= p || s.phase.CompareAndSwap(cur, p) {
			return
		}
	}
}

// DeadlineObserver is an optional extension of Observer: BeforeDeadline is called
// when a deadline fires, before the request is cancelled, so the caller can ask the
// server what it knows about the request while the server still holds it. It runs on
// a timer goroutine and must return promptly (it delays the cancellation, not the
// classification: the request is classified by the deadline that fired first).
type DeadlineObserver interface {
	BeforeDeadline(req *Request, deadline string, phase ledger.Phase)
}

// fire returns what the deadline timer calls when a deadline fires.
func (c *Client) fire(req *Request, st *reqState, obs Observer) func(cause error, name string) {
	return func(cause error, name string) {
		f := &fired{cause: cause, name: name, phase: phaseNames[st.phase.Load()], done: make(chan struct{})}
		if cause == ErrConnectDeadline {
			f.phase = ledger.PhaseConnect
		}
		if !st.fired.CompareAndSwap(nil, f) {
			return
		}
		defer close(f.done)
		if do, ok := obs.(DeadlineObserver); ok {
			if !st.hardEnd.IsZero() {
				// Backstop: even if the observer hangs, the request ends.
				cancel := st.cancel
				bs := time.AfterFunc(time.Until(st.hardEnd), func() { cancel(ErrTotalDeadline) })
				defer bs.Stop()
			}
			do.BeforeDeadline(req, name, f.phase)
		}
		st.cancel(cause)
	}
}

// waitFired waits (bounded) for a firing deadline's observer, so that whatever it
// recorded is there when Do returns and no timer goroutine outlives the request.
// A deadline that fires after the result is final finds the sentinel and does nothing.
func (s *reqState) waitFired(grace time.Duration) {
	if s.fired.CompareAndSwap(nil, finishedSentinel) {
		return
	}
	if f := s.fired.Load(); f != nil && f != finishedSentinel {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-f.done:
		case <-t.C:
		}
	}
}

// Do sends req and returns its classified result. It never panics on a bad server
// and returns by the total deadline (plus scheduling noise) at the latest; a
// cancelled ctx ends the request as cancelled.
func (c *Client) Do(ctx context.Context, req *Request, obs Observer) *Result {
	res := &Result{ID: req.ID, Scheduled: req.Scheduled}
	now := c.now()
	if res.Scheduled.IsZero() {
		res.Scheduled = now
	}
	res.Sent = now
	if obs != nil {
		obs.Sent(req, now)
	}
	body, path, err := Body(req)
	if err != nil {
		return c.finish(res, ledger.OutcomeInvalid, "", err)
	}

	// The request's context is not registered on ctx: ctx's end reaches it through the
	// client's watch (one AfterFunc per caller context, watch.go), and cancelling it also
	// aborts the transport's I/O (h1), so no context hangs off it (a children map and a
	// done channel for every held stream).
	st := &reqState{}
	rctx, cancelCtx := context.WithCancelCause(context.WithoutCancel(ctx))
	cancel := func(cause error) {
		cancelCtx(cause)
		st.runAbort()
	}
	st.cancel = cancel
	if ctx.Done() != nil {
		c.watch.add(ctx, st)
		defer c.watch.remove(ctx, st)
	}
	if ctx.Err() != nil {
		cancel(context.Cause(ctx))
	}
	defer st.waitFired(c.inspectGrace) // runs after the timers are stopped
	defer cancel(nil)
	c.armDeadlines(req, st, obs, now)
	defer st.stop()
	if c.h1 != nil {
		return c.doH1(rctx, req, res, st, obs, path, body)
	}
	return c.doHTTP(rctx, req, res, st, obs, path, body, cancel)
}

// doHTTP is Do's body on net/http (https:// targets). A function of its own so that its
// locals are not in the frame of every held h1 stream.
//
//go:noinline
func (c *Client) doHTTP(rctx context.Context, req *Request, res *Result, st *reqState, obs Observer, path string, body []byte, cancel context.CancelCauseFunc) *Result {
	hreq, err := c.newHTTPRequest(rctx, req, st, path, body)
	if err != nil {
		return c.finish(res, ledger.OutcomeInvalid, "", err)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return c.classifyErr(rctx, res, st, err)
	}
	defer resp.Body.Close()
	cb := &countingReader{r: resp.Body}
	defer func() { res.Bytes = cb.n }()
	h := &head{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"),
		contentEncoding: strings.Join(resp.Header.Values("Content-Encoding"), ", "), retryAfter: resp.Header.Get("Retry-After")}
	res = c.afterHead(rctx, req, res, st, obs, h, cb, nil)
	if res.Outcome == ledger.OutcomeOK && req.Stream {
		st.stop()
		drain(cb, cancel, c.drainGrace)
	}
	return res
}

// armDeadlines starts the deadline timer (the stall bound starts with the stream) and
// sets the hard backstop past the total deadline.
func (c *Client) armDeadlines(req *Request, st *reqState, obs Observer, now time.Time) {
	if dl := req.Deadlines; dl.Total > 0 {
		// Only a hanging deadline observer can keep a request past its total deadline;
		// fire arms the backstop for that case when it calls one.
		st.hardEnd = now.Add(dl.Total + c.inspectGrace)
	}
	st.dls.arm(req.Deadlines, req.Stream, &st.phase, c.fire(req, st, obs))
}

// newHTTPRequest builds the POST for req; writing it ends the connect phase.
func (c *Client) newHTTPRequest(ctx context.Context, req *Request, st *reqState, path string, body []byte) (*http.Request, error) {
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		st.advance(phBeforeHeaders) // the connect deadline is over
	}}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("client: build request: %w", err)
	}
	for k, v := range c.header {
		hreq.Header[k] = v
	}
	for k, v := range req.Header {
		hreq.Header[k] = v
	}
	if req.TraceParent != "" && hreq.Header.Get("Traceparent") == "" {
		hreq.Header.Set("Traceparent", req.TraceParent)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("X-Request-ID", req.ID)
	hreq.Header.Set("Accept-Encoding", "identity") // see coding.go
	if req.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	return hreq, nil
}
