package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
	"pdsoak/traceparent"
)

// Defaults of the Router options.
const (
	// DefaultHealthInterval is how often every worker's /health is polled.
	DefaultHealthInterval = 1 * time.Second
	// DefaultHealthTimeout bounds one /health or /server_info call.
	DefaultHealthTimeout = 2 * time.Second
	// DefaultFailThreshold is how many failed health checks in a row mark a worker
	// unhealthy (a transport error on a request marks it at once).
	DefaultFailThreshold = 2
	// DefaultConnectTimeout bounds the TCP connect to a worker.
	DefaultConnectTimeout = 2 * time.Second
	// DefaultMaxRetries is how many other pairs a request may try while nothing has been
	// sent to the client.
	DefaultMaxRetries = 2
	// DefaultDeadlineGrace is added to a request's deadline before the router gives up on
	// the legs itself, so that workers report their own timeout first.
	DefaultDeadlineGrace = 2 * time.Second
	// DefaultPrefillGrace is how long a finished request waits for its prefill leg's own
	// end before the leg is cancelled.
	DefaultPrefillGrace = 250 * time.Millisecond
	// DefaultFinalSendTimeout bounds the wait for the consumer to take the final event.
	DefaultFinalSendTimeout = 30 * time.Second
)

// Worker is one prefill or decode worker.
type Worker struct {
	// URL is the worker's HTTP base URL (http://host:port).
	URL string
	// BootstrapAddr (prefill only) is the KV bootstrap address decode dials. Empty: read
	// from the worker's GET /server_info field "bootstrap_addr" at every health check, so
	// a restart never leaves a stale address.
	BootstrapAddr string
}

// Option configures a Router.
type Option func(*Router)

// WithHealthInterval sets the /health polling interval.
func WithHealthInterval(d time.Duration) Option { return func(r *Router) { r.healthInterval = d } }

// WithHealthTimeout bounds each health and server_info call.
func WithHealthTimeout(d time.Duration) Option { return func(r *Router) { r.healthTimeout = d } }

// WithFailThreshold sets how many failed checks in a row make a worker unhealthy.
func WithFailThreshold(n int) Option { return func(r *Router) { r.failThreshold = n } }

// WithMaxRetries sets how many other pairs a request may try before any output.
func WithMaxRetries(n int) Option { return func(r *Router) { r.maxRetries = n } }

// WithPrefillGrace sets how long a finished request waits for its prefill leg's own end
// before cancelling it (default DefaultPrefillGrace).
func WithPrefillGrace(d time.Duration) Option { return func(r *Router) { r.prefillGrace = d } }

// WithSeed seeds the generator of bootstrap rooms and tie breaks.
func WithSeed(seed uint64) Option {
	return func(r *Router) { r.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
}

// WithClient replaces the HTTP client used for the legs and health checks.
func WithClient(c *http.Client) Option { return func(r *Router) { r.client = c } }

// WithLogger sets the structured logger.
func WithLogger(l *slog.Logger) Option { return func(r *Router) { r.log = l } }

// WithDeadlineGrace sets how long past a request's deadline the router waits for the legs.
func WithDeadlineGrace(d time.Duration) Option { return func(r *Router) { r.deadlineGrace = d } }

// WithAbortOnUnhealthy (default true) fails the in-flight requests of a worker as soon as
// it is marked unhealthy (it stopped answering /health, or refused a connection), so a
// frozen or partitioned worker turns into explicit errors (retried on another pair when
// nothing was sent yet) rather than requests that hang until their deadline.
func WithAbortOnUnhealthy(on bool) Option { return func(r *Router) { r.abortOnUnhealthy = on } }

// WithRoomSalt fixes the value mixed into bootstrap rooms (default: the time New ran, so
// a restarted router never reuses the rooms of its previous run, which workers may still
// remember as failed). Pairing tie-breaks depend on the seed only.
func WithRoomSalt(salt uint64) Option { return func(r *Router) { r.roomSalt = salt } }

// WithKVLink makes decode worker decodeURL reach prefill worker prefillURL's bootstrap
// server at addr instead (a fault proxy on that KV link).
func WithKVLink(prefillURL, decodeURL, addr string) Option {
	return func(r *Router) { r.kvLinks[[2]string{prefillURL, decodeURL}] = addr }
}

// WithSGLangBugs switches on the router's reproductions of upstream SGLang router bugs
// (scheduler.BugPrefillFailNoDecodeAbort, scheduler.BugDecodeOnlyWhenPrefillDown); the
// CLI allows them only with --semantics sglang.
func WithSGLangBugs(b scheduler.BugSet) Option {
	return func(r *Router) { r.bugs = append(scheduler.BugSet(nil), b...) }
}

// Router is a gen.Generator and gen.Inspector that serves each request with a prefill
// and a decode worker. Start it before use; Close it when done.
type Router struct {
	healthInterval, healthTimeout, deadlineGrace time.Duration
	prefillGrace                                 time.Duration
	failThreshold, maxRetries                    int
	abortOnUnhealthy                             bool
	roomSalt                                     uint64
	client                                       *http.Client
	legs                                         *legClient // nil: legs through client
	log                                          *slog.Logger
	kvLinks                                      map[[2]string]string
	bugs                                         scheduler.BugSet
	fallback                                     Fallback // --pd-fallback (fallback.go)

	prefill, decode []*worker

	rngMu sync.Mutex
	rng   *rand.Rand

	reqMu sync.Mutex
	reqs  map[uint64]*reqState
	seq   uint64

	metrics *metrics
	stop    context.CancelFunc
	done    chan struct{}
	closed  atomic.Bool
}

type worker struct {
	url, role, name string
	target          legTarget // url's /generate for the leg client
	lean            bool      // target is usable (http)
	explicitBoot    bool
	outstanding     atomic.Int64
	healthy         atomic.Bool

	mu      sync.Mutex
	boot    string
	health  Health // healthy mirrors health.Healthy for lock-free reads
	lastErr string
	down    chan struct{} // closed when the worker goes unhealthy; replaced when it recovers
}

// downCh is closed when the worker next goes unhealthy.
func (w *worker) downCh() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.down
}

// track applies a health decision (health.go) with lastErr (empty: none); when it
// changes the worker's health, the mirror and the down channel follow. False when
// nothing changed.
func (w *worker) track(decide func(*Health) bool, lastErr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = lastErr
	if !decide(&w.health) {
		return false
	}
	ok := w.health.Healthy
	w.healthy.Store(ok)
	if ok {
		w.down = make(chan struct{})
	} else {
		close(w.down)
	}
	return true
}

func (w *worker) bootstrap() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.boot
}

// reqState is one in-flight request, for /debug/requests.
type reqState struct {
	id                  string
	start, stageSince   time.Time
	stage               string
	room                *uint64
	prompt, out         int
	prefillURL, decodeU string
}

// New builds a router over the given workers. Call Start to begin health checking.
func New(prefill, decode []Worker, opts ...Option) (*Router, error) {
	if len(prefill) == 0 || len(decode) == 0 {
		return nil, fmt.Errorf("router: need at least one prefill and one decode worker (got %d, %d)", len(prefill), len(decode))
	}
	r := &Router{
		healthInterval: DefaultHealthInterval, healthTimeout: DefaultHealthTimeout,
		deadlineGrace: DefaultDeadlineGrace, prefillGrace: DefaultPrefillGrace, failThreshold: DefaultFailThreshold,
		maxRetries: DefaultMaxRetries, log: slog.Default(), kvLinks: map[[2]string]string{},
		abortOnUnhealthy: true, roomSalt: uint64(time.Now().UnixNano()),
		reqs: map[uint64]*reqState{}, done: make(chan struct{}),
		rng: rand.New(rand.NewPCG(1, 2)),
	}
	for _, o := range opts {
		o(r)
	}
	if r.client == nil {
		// The legs go through the leg client; net/http serves the health checks (and
		// the legs only when WithClient asks for a client of its own).
		r.legs = newLegClient(DefaultConnectTimeout)
		r.client = &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: DefaultConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 512,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	add := func(ws []Worker, role string) ([]*worker, error) {
		var out []*worker
		for i, w := range ws {
			u := strings.TrimRight(w.URL, "/")
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return nil, fmt.Errorf("router: %s worker %q is not an http(s) URL", role, w.URL)
			}
			if seen[u] {
				return nil, fmt.Errorf("router: worker %s listed twice", u)
			}
			seen[u] = true
			down := make(chan struct{})
			close(down) // unhealthy until the first check passes
			t, lean := parseLegTarget(u)
			out = append(out, &worker{url: u, role: role, name: fmt.Sprintf("%s-%d", role, i), target: t, lean: lean,
				boot: w.BootstrapAddr, explicitBoot: w.BootstrapAddr != "", down: down})
		}
		return out, nil
	}
	var err error
	if r.prefill, err = add(prefill, "prefill"); err != nil {
		return nil, err
	}
	if r.decode, err = add(decode, "decode"); err != nil {
		return nil, err
	}
	r.metrics = newMetrics(r)
	return r, nil
}

// Gatherer serves the router's own metrics.
func (r *Router) Gatherer() prometheus.Gatherer { return r.metrics.reg }

// Start checks every worker once (bounded by the health timeout) and then keeps checking
// every health interval until Close.
func (r *Router) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	r.checkAll(ctx)
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.healthInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.checkAll(ctx)
				if r.legs != nil {
					r.legs.reap()
				}
			}
		}
	}()
}

// Close stops health checking. Requests in flight continue until their contexts end.
func (r *Router) Close() error {
	if r.closed.Swap(true) || r.stop == nil {
		return nil
	}
	r.stop()
	<-r.done
	r.client.CloseIdleConnections()
	if r.legs != nil {
		r.legs.close()
	}
	return nil
}

func (r *Router) workers() []*worker {
	return append(append([]*worker(nil), r.prefill...), r.decode...)
}

func (r *Router) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range r.workers() {
		wg.Add(1)
		go func() { defer wg.Done(); r.check(ctx, w) }()
	}
	wg.Wait()
}

// check polls one worker's /health (and /server_info for a prefill whose bootstrap
// address must be learned).
func (r *Router) check(ctx context.Context, w *worker) {
	ctx, cancel := context.WithTimeout(ctx, r.healthTimeout)
	defer cancel()
	err := r.get(ctx, w.url+"/health", nil)
	if err == nil && w.role == "prefill" && !w.explicitBoot {
		var info struct {
			BootstrapAddr string `json:"bootstrap_addr"`
		}
		if err = r.get(ctx, w.url+"/server_info", &info); err == nil {
			if info.BootstrapAddr == "" {
				err = errors.New("server_info has no bootstrap_addr")
			} else {
				w.mu.Lock()
				old := w.boot
				w.boot = info.BootstrapAddr
				w.mu.Unlock()
				if old != "" && old != info.BootstrapAddr {
					r.log.Warn("router: prefill bootstrap address changed", "worker", w.name, "old", old, "new", info.BootstrapAddr)
				}
			}
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // shutting down
	}
	lastErr := ""
	if err != nil {
		lastErr = err.Error()
	}
	if !w.track(func(h *Health) bool { return h.Checked(err == nil, r.failThreshold) }, lastErr) {
		return
	}
	if err == nil {
		r.log.Info("router: worker healthy", "worker", w.name, "url", w.url, "bootstrap_addr", w.bootstrap())
	} else {
		r.log.Warn("router: worker unhealthy", "worker", w.name, "url", w.url, "err", err)
	}
}

func (r *Router) get(ctx context.Context, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %.200s", url, resp.StatusCode, bytes.TrimSpace(body))
	}
	if into != nil {
		return json.Unmarshal(body, into)
	}
	return nil
}

// markDown marks a worker unhealthy at once after a transport error on a request.
func (r *Router) markDown(w *worker, err error) {
	if w.track(func(h *Health) bool { return h.MarkDown(r.failThreshold) }, err.Error()) {
		r.log.Warn("router: worker unhealthy after a request failed", "worker", w.name, "url", w.url, "err", err)
	}
}

// candidates describes ws for the pure decisions (decide.go).
func candidates(ws []*worker, exclude map[*worker]bool) []Candidate {
	out := make([]Candidate, len(ws))
	for i, w := range ws {
		out[i] = Candidate{Healthy: w.healthy.Load(), Excluded: exclude[w], HasBootstrap: w.role != "prefill" || w.bootstrap() != "",
			Outstanding: w.outstanding.Load()}
	}
	return out
}

// Healthy is nil while at least one healthy prefill/decode pair exists. It draws no
// randomness, so polling it leaves the seeded tie-breaks unchanged.
func (r *Router) Healthy() error {
	if !HasRoute(candidates(r.prefill, nil), candidates(r.decode, nil), r.bugs, r.fallback) {
		return NoPairError(r.describe())
	}
	return nil
}

// pick returns the healthy prefill and decode with the fewest outstanding requests,
// skipping excluded workers; ties are broken at random (PickRoute). The prefill is nil
// when the request goes to decode alone (FallbackDecodeOnly).
func (r *Router) pick(exclude map[*worker]bool) (*worker, *worker, error) {
	intn := func(n int) int {
		r.rngMu.Lock()
		defer r.rngMu.Unlock()
		return r.rng.IntN(n)
	}
	route, err := PickRoute(candidates(r.prefill, exclude), candidates(r.decode, exclude), r.bugs, r.fallback, intn, r.describe)
	if err != nil {
		return nil, nil, err
	}
	if route.DecodeOnly {
		return nil, r.decode[route.Decode], nil
	}
	return r.prefill[route.Prefill], r.decode[route.Decode], nil
}

func (r *Router) describe() string {
	var parts []string
	for _, w := range r.workers() {
		w.mu.Lock()
		state := "healthy"
		if !w.healthy.Load() {
			state = "unhealthy"
			if w.lastErr != "" {
				state += ": " + w.lastErr
			}
		}
		w.mu.Unlock()
		parts = append(parts, w.name+" "+state)
	}
	return strings.Join(parts, "; ")
}

func (r *Router) room() uint64 {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	for {
		if v, ok := Room(r.rng.Uint64(), r.roomSalt); ok {
			return v
		}
	}
}

// Requests lists the in-flight requests with the pair each went to.
func (r *Router) Requests() []gen.RequestInfo {
	now := time.Now()
	r.reqMu.Lock()
	out := make([]gen.RequestInfo, 0, len(r.reqs))
	for _, s := range r.reqs {
		out = append(out, gen.RequestInfo{ID: s.id, Stage: s.stage, AgeSeconds: now.Sub(s.start).Seconds(),
			StageAgeSeconds: now.Sub(s.stageSince).Seconds(), Room: s.room, PromptTokens: s.prompt,
			OutputTokens: s.out, Prefill: s.prefillURL, Decode: s.decodeU})
	}
	r.reqMu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].AgeSeconds > out[j].AgeSeconds })
	return out
}

func (r *Router) setStage(s *reqState, stage string, f func(*reqState)) {
	r.reqMu.Lock()
	if s.stage != stage {
		s.stage, s.stageSince = stage, time.Now()
	}
	if f != nil {
		f(s)
	}
	r.reqMu.Unlock()
}

// Generate routes req to a prefill/decode pair. It refuses at once with ErrUnavailable
// when no healthy pair exists; otherwise the returned channel carries the decode leg's
// tokens and exactly one Done event.
func (r *Router) Generate(ctx context.Context, req *gen.Request) (<-chan gen.Event, error) {
	if r.closed.Load() {
		return nil, fmt.Errorf("router: closed: %w", gen.ErrUnavailable)
	}
	if err := CheckRequest(req); err != nil {
		return nil, err
	}
	if err := r.Healthy(); err != nil {
		r.metrics.requests.Inc()
		r.metrics.errors.WithLabelValues(gen.ErrorKind(err)).Inc()
		return nil, err
	}
	r.metrics.requests.Inc()
	now := time.Now()
	r.reqMu.Lock()
	r.seq++
	key := r.seq
	st := &reqState{id: req.ID, start: now, stageSince: now, stage: "routing", prompt: len(req.Prompt)}
	r.reqs[key] = st
	r.reqMu.Unlock()
	out := make(chan gen.Event, 16)
	go func() {
		defer close(out)
		deliver := func(ev gen.Event) { r.deliver(out, ev, req.ID, now) }
		ev, delivered := r.serve(ctx, req, st, out, deliver)
		r.reqMu.Lock()
		delete(r.reqs, key)
		r.reqMu.Unlock()
		if !delivered {
			deliver(ev)
		}
	}()
	return out, nil
}

// deliver sends a request's final event, counting it.
func (r *Router) deliver(out chan<- gen.Event, ev gen.Event, rid string, start time.Time) {
	if ev.Err != nil {
		r.metrics.errors.WithLabelValues(gen.ErrorKind(ev.Err)).Inc()
	}
	r.metrics.e2e.Observe(time.Since(start).Seconds())
	t := time.NewTimer(DefaultFinalSendTimeout)
	defer t.Stop()
	select {
	case out <- ev:
	case <-t.C:
		r.log.Warn("router: consumer never took the final event", "rid", rid)
	}
}

// serve runs the attempts of one request and returns its final event; delivered is true
// when a successful attempt already delivered it (before its prefill leg had ended).
func (r *Router) serve(ctx context.Context, req *gen.Request, st *reqState, out chan<- gen.Event, deliver func(gen.Event)) (ev gen.Event, delivered bool) {
	log := &reqLog{base: r.log, attrs: []any{"rid", req.ID}}
	if tp, ok := traceparent.FromContext(ctx); ok {
		log.attrs = append(log.attrs, "trace_id", tp.TraceIDHex())
	}
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline.Add(r.deadlineGrace))
		defer cancel()
	}
	exclude := map[*worker]bool{}
	var last error
	for attempt := 0; ; attempt++ {
		p, d, err := r.pick(exclude)
		if err != nil {
			if last != nil {
				err = last // no other pair to try: the failure itself says most
			}
			return gen.Event{Done: true, Err: err}, false
		}
		res := r.attempt(ctx, req, st, p, d, out, deliver, log)
		if res.err == nil {
			return res.ev, res.delivered
		}
		last = res.err
		deadline := ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded)
		if final, retry := AfterAttempt(Attempt{Err: res.err, Sent: res.sent, Transport: res.transport,
			Number: attempt, MaxRetries: r.maxRetries, DeadlinePassed: deadline,
			ClientGone: ctx.Err() != nil && !deadline}); !retry {
			return gen.Event{Done: true, Err: final}, false
		}
		if res.failed != nil {
			exclude[res.failed] = true // try the other workers of that role
		}
		r.metrics.retries.Inc()
		log.Warn("router: retrying on another pair", "attempt", attempt+1, "err", res.err)
	}
}

// result is how one attempt ended.
type result struct {
	ev        gen.Event // the final event on success
	delivered bool      // ev already went to the client
	err       error
	sent      bool    // tokens reached the client
	transport bool    // no usable answer from a worker (refused, reset, truncated)
	failed    *worker // the worker whose leg failed
}

// leg is the outcome of one worker stream.
type leg struct {
	err       error
	transport bool
}

// attempt runs both legs of one request on one pair: build the worker request, send
// it to both workers, then relay decode's chunks to the client until decode finishes
// or a leg fails. When it returns, both legs are gone.
func (r *Router) attempt(ctx context.Context, req *gen.Request, st *reqState, p, d *worker, out chan<- gen.Event, deliver func(gen.Event), log *reqLog) result {
	if p == nil { // FallbackDecodeOnly found no prefill (fallback.go)
		return r.attemptDecodeOnly(ctx, req, st, d, out, deliver, log)
	}
	room := r.room()
	body, err := r.workerRequest(req, room, p, d)
	if err != nil {
		return result{err: err}
	}
	r.setStage(st, "prefill+decode", func(s *reqState) { s.room, s.prefillURL, s.decodeU = &room, p.url, d.url })
	log = log.with("room", room, "prefill", p.name, "decode", d.name)
	log.Info("router: request routed")
	defer r.hold(p, d)()

	// The legs end with the request (its client going away, its deadline) until the
	// final event is delivered; then only the prefill grace bounds them (relay.finish),
	// since the client's handler ends the request's context as soon as it has the answer.
	actx, cancelCause := context.WithCancelCause(context.WithoutCancel(ctx))
	cancel := func() { cancelCause(context.Canceled) }
	unlink := context.AfterFunc(ctx, func() { cancelCause(context.Cause(ctx)) })
	defer unlink()
	defer cancel()
	decodeOnly := DecodeOnly(r.bugs, p.healthy.Load())
	if decodeOnly {
		log.Warn("router: prefill unhealthy; sending the decode leg alone (sglang#31206 reproduced)")
	}
	legs := r.sendLegs(actx, p, d, body, req.ID, decodeOnly)
	defer legs.wait() // after cancel (deferred later, runs first): both legs are gone
	defer cancel()

	rl := &relay{r: r, ctx: ctx, cancel: cancel, unlink: unlink, st: st, p: p, d: d, out: out, deliver: deliver, log: log, legs: legs}
	if r.abortOnUnhealthy {
		rl.pDown, rl.dDown = p.downCh(), d.downCh()
	}
	if decodeOnly {
		rl.pDown = nil // no prefill leg to fail
	}
	return rl.run()
}

// workerRequest encodes the /generate body both workers of the pair receive (p nil: the
// decode-only body, without a bootstrap room).
func (r *Router) workerRequest(req *gen.Request, room uint64, p, d *worker) ([]byte, error) {
	boot := ""
	if p != nil {
		boot = p.bootstrap()
		if a, ok := r.kvLinks[[2]string{p.url, d.url}]; ok {
			boot = a
		}
	}
	wr := gen.WorkerRequest{RID: req.ID, InputIDs: req.Prompt, BootstrapRoom: &room, BootstrapAddr: boot,
		SamplingParams: gen.WorkerSampling{MaxNewTokens: req.MaxTokens, Temperature: req.Sampling.Temperature,
			TopP: req.Sampling.TopP, Seed: req.Sampling.Seed, IgnoreEOS: req.IgnoreEOS}}
	if p == nil {
		decodeOnlyRequest(&wr)
	}
	if !req.Deadline.IsZero() {
		wr.DeadlineUnixMs = req.Deadline.UnixMilli()
	}
	body, err := gen.AppendWorkerRequest(make([]byte, 0, 256+8*len(req.Prompt)), &wr)
	if err != nil {
		return nil, fmt.Errorf("router: encode request: %w", gen.ErrInternal)
	}
	return body, nil
}

// hold counts the request as outstanding on both workers; the returned func releases it.
func (r *Router) hold(p, d *worker) (release func()) {
	p.outstanding.Add(1)
	d.outstanding.Add(1)
	r.metrics.outstanding.WithLabelValues(p.name).Inc()
	r.metrics.outstanding.WithLabelValues(d.name).Inc()
	return func() {
		p.outstanding.Add(-1)
		d.outstanding.Add(-1)
		r.metrics.outstanding.WithLabelValues(p.name).Dec()
		r.metrics.outstanding.WithLabelValues(d.name).Dec()
	}
}

// decodeChunk is one chunk of the decode leg, or (end set) how that leg ended.
type decodeChunk struct {
	c   gen.WorkerChunk
	end *leg
}

// legs are the two worker streams of one attempt.
type legs struct {
	wg          sync.WaitGroup
	prefillDone chan leg         // the prefill leg's end (it forwards nothing)
	chunks      chan decodeChunk // the decode leg's chunks, then its end
}

// sendLegs starts the prefill and the decode leg on ctx; cancel ctx, then wait, to end
// them.
func (r *Router) sendLegs(ctx context.Context, p, d *worker, body []byte, rid string, decodeOnly bool) *legs {
	// chunks is buffered: the decode leg reads on while the relay is busy instead of
	// waiting for it chunk by chunk (order is kept; the leg's end comes last).
	l := &legs{prefillDone: make(chan leg, 1), chunks: make(chan decodeChunk, 8)}
	// Both requests are written here, decode's first, before any goroutine starts: the
	// transfer starts with decode's registration, which prefill waits for, so decode's
	// request is on the critical path and should not wait for a goroutine to be
	// scheduled. The goroutines only read the answers.
	dl := r.beginLeg(ctx, d, body, rid)
	var pl pendingLeg
	if !decodeOnly {
		pl = r.beginLeg(ctx, p, body, rid)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		end := r.readLeg(ctx, d, dl, func(c gen.WorkerChunk) error {
			select {
			case l.chunks <- decodeChunk{c: c}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		select {
		case l.chunks <- decodeChunk{end: &end}:
		case <-ctx.Done():
		}
	}()
	if !decodeOnly { // decodeOnly (BugDecodeOnlyWhenPrefillDown): prefillDone never fires
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.prefillDone <- r.readLeg(ctx, p, pl, func(gen.WorkerChunk) error { return nil })
		}()
	}
	return l
}

func (l *legs) wait() { l.wg.Wait() }

// relay carries one attempt's decode tokens to the client while watching the prefill
// leg and both workers' health.
type relay struct {
	r      *Router
	ctx    context.Context // the request's context (not the legs')
	cancel context.CancelFunc
	st     *reqState
	p, d   *worker
	out    chan<- gen.Event
	log    *reqLog
	// deliver sends the final event; unlink stops the request's end from cancelling
	// the legs.
	deliver func(gen.Event)
	unlink  func() bool
	legs    *legs

	prefillDone  <-chan leg      // nil once the prefill leg ended
	pDown, dDown <-chan struct{} // closed when a worker goes unhealthy; nil: not watched
	sent         bool            // tokens reached the client
	kvArrived    bool            // decode produced output, so the KV transfer is complete
}

// run waits for the first of: the request ending, a worker going unhealthy, the prefill
// leg ending, or a decode chunk; it returns once the attempt is decided.
func (rl *relay) run() result {
	rl.prefillDone = rl.legs.prefillDone
	for {
		select {
		case <-rl.ctx.Done():
			return rl.gone()
		case <-rl.pDown:
			return rl.fail(rl.p, leg{err: UnhealthyError(rl.p.role, rl.p.name), transport: true})
		case <-rl.dDown:
			return rl.fail(rl.d, leg{err: UnhealthyError(rl.d.role, rl.d.name), transport: true})
		case l := <-rl.prefillDone:
			if res, over := rl.prefillEnded(l); over {
				return res
			}
		case c := <-rl.legs.chunks:
			if res, over := rl.decodeChunk(c); over {
				return res
			}
		}
	}
}

// gone is the result when the request's context ended.
func (rl *relay) gone() result {
	return result{err: fmt.Errorf("router: %w", context.Cause(rl.ctx)), sent: rl.sent}
}

// fail ends the attempt on a failed leg of w, marking w down after a transport error.
func (rl *relay) fail(w *worker, l leg) result {
	if l.transport && rl.ctx.Err() == nil {
		rl.r.markDown(w, l.err)
	}
	rl.log.Warn("router: leg failed", "worker", w.name, "err", l.err, "sent", rl.sent)
	return result{err: l.err, sent: rl.sent, transport: l.transport, failed: w}
}

// prefillEnded handles the prefill leg's end: before decode has its KV a failure dooms
// the attempt; after, it no longer matters.
func (rl *relay) prefillEnded(l leg) (result, bool) {
	rl.prefillDone = nil
	rl.pDown = nil // prefill's part is over; its health no longer matters here
	switch PrefillEnded(l.err, rl.kvArrived, rl.r.bugs) {
	case PrefillLeaveDecode:
		// sglang#9726: the router only waits for the decode leg; a failed prefill leg is
		// drained in the background and the decode leg is left to wait for its KV.
		rl.log.Warn("router: prefill leg failed; decode leg left running (sglang#9726 reproduced)", "err", l.err)
	case PrefillFailAttempt:
		rl.cancel() // the decode leg cannot complete without its KV
		return rl.fail(rl.p, l), true
	default:
		if l.err != nil {
			rl.log.Info("router: prefill leg failed after decode had its KV; ignored", "err", l.err)
		}
	}
	return result{}, false
}

// decodeChunk handles one decode chunk: the leg's end, an error, the done chunk, or
// tokens to forward.
func (rl *relay) decodeChunk(c decodeChunk) (result, bool) {
	if c.end != nil {
		if c.end.err == nil {
			c.end.err, c.end.transport = fmt.Errorf("%w: decode stream ended without a done event", gen.ErrInternal), true
		}
		return rl.fail(rl.d, *c.end), true
	}
	if c.c.Error != nil {
		return rl.fail(rl.d, leg{err: c.c.Error.Err()}), true
	}
	ev := gen.Event{Tokens: c.c.TokenIDs, Done: c.c.Done}
	if c.c.Done {
		ev.Finish, ev.PromptTokens, ev.CompletionTokens = c.c.Finish, c.c.PromptTokens, c.c.CompletionTokens
		return rl.finish(ev), true
	}
	if len(ev.Tokens) == 0 {
		return result{}, false
	}
	return rl.forward(ev)
}

// finish ends a successful attempt, letting the prefill leg end on its own (bounded by
// DefaultPrefillGrace) rather than aborting it.
func (rl *relay) finish(ev gen.Event) result {
	if rl.log.enabled(slog.LevelInfo) { // the arguments cost allocations
		rl.log.Info("router: request finished", "finish_reason", ev.Finish, "completion_tokens", ev.CompletionTokens)
	}
	if rl.prefillDone == nil {
		return result{ev: ev}
	}
	// The client has its answer now rather than after the prefill leg's end (one more
	// hop from decode's ACK through prefill). From here the request's context ending is
	// the client leaving satisfied, not a reason to abort the prefill leg.
	rl.unlink()
	rl.deliver(ev)
	t := time.NewTimer(rl.r.prefillGrace)
	select {
	case <-rl.prefillDone:
	case <-t.C:
	}
	t.Stop()
	return result{ev: ev, delivered: true}
}

// forward sends decode tokens to the client.
func (rl *relay) forward(ev gen.Event) (result, bool) {
	rl.kvArrived, rl.pDown = true, nil // a token means decode has its KV
	if !rl.sent {
		rl.r.setStage(rl.st, "streaming", nil)
		rl.r.metrics.ttft.Observe(time.Since(rl.st.start).Seconds())
	}
	select {
	case rl.out <- ev:
		rl.sent = true
		rl.r.setStage(rl.st, "streaming", func(s *reqState) { s.out += len(ev.Tokens) })
		return result{}, false
	case <-rl.ctx.Done():
		return rl.gone(), true
	}
}

// pendingLeg is a leg whose request went out (lean client) or is still to be sent
// (net/http).
type pendingLeg struct {
	call *legCall
	err  error
	body []byte
	rid  string
	lean bool // through the leg client: call or err is set
}

// beginLeg writes the leg's request when the leg client serves the worker; the answer
// is read by readLeg.
func (r *Router) beginLeg(ctx context.Context, w *worker, body []byte, rid string) pendingLeg {
	if r.legs == nil || !w.lean {
		return pendingLeg{body: body, rid: rid}
	}
	call, err := r.legs.begin(ctx, w.target, body, rid)
	return pendingLeg{call: call, err: err, lean: true}
}

// readLeg reads a leg's answer and feeds each chunk to fn until the done chunk.
// A leg's error wraps a gen sentinel; transport is set when the worker gave no usable
// answer.
func (r *Router) readLeg(ctx context.Context, w *worker, pl pendingLeg, fn func(gen.WorkerChunk) error) leg {
	if !pl.lean {
		return r.runLegHTTP(ctx, w, pl.body, pl.rid, fn)
	}
	var resp *legResponse
	err := pl.err
	if err == nil {
		resp, err = pl.call.response()
	}
	if err != nil {
		return leg{err: fmt.Errorf("router: %s %s: %w: %w", w.role, w.name, gen.ErrUnavailable, err), transport: true}
	}
	complete := false
	defer func() { resp.finish(complete) }()
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		complete = err == nil
		return leg{err: fmt.Errorf("router: %s %s: %w", w.role, w.name, statusError(resp.StatusCode, b))}
	}
	var final error
	err = readSSE(resp.Body, func(c gen.WorkerChunk) (bool, error) {
		if c.Error != nil || c.Done {
			// The answer is complete: from here the connection no longer depends on
			// ctx, so cancelling the attempt right after cannot spoil its reuse.
			complete = resp.detach()
		}
		if c.Error != nil {
			final = fmt.Errorf("router: %s %s: %w", w.role, w.name, c.Error.Err())
			return true, nil
		}
		if err := fn(c); err != nil {
			return true, err
		}
		return c.Done, nil
	})
	if final != nil {
		return leg{err: final}
	}
	if err != nil {
		complete = false
		if ctx.Err() != nil {
			return leg{err: fmt.Errorf("router: %s %s: %w", w.role, w.name, context.Cause(ctx))}
		}
		return leg{err: fmt.Errorf("router: %s %s: %w: %w", w.role, w.name, gen.ErrInternal, err), transport: true}
	}
	return leg{}
}

// runLegHTTP is runLeg through net/http (a WithClient client, or an https worker).
func (r *Router) runLegHTTP(ctx context.Context, w *worker, body []byte, rid string, fn func(gen.WorkerChunk) error) leg {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url+"/generate", bytes.NewReader(body))
	if err != nil {
		return leg{err: fmt.Errorf("router: %s: %w: %w", w.name, gen.ErrInternal, err)}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if rid != "" {
		hreq.Header.Set("X-Request-ID", rid)
	}
	if tp, ok := traceparent.FromContext(ctx); ok {
		hreq.Header.Set(traceparent.Header, tp.String()) // both legs join the client's trace
	}
	resp, err := r.client.Do(hreq)
	if err != nil {
		return leg{err: fmt.Errorf("router: %s %s: %w: %w", w.role, w.name, gen.ErrUnavailable, err), transport: true}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return leg{err: fmt.Errorf("router: %s %s: %w", w.role, w.name, statusError(resp.StatusCode, b))}
	}
	var final error
	err = readSSE(resp.Body, func(c gen.WorkerChunk) (bool, error) {
		if c.Error != nil {
			final = fmt.Errorf("router: %s %s: %w", w.role, w.name, c.Error.Err())
			return true, nil
		}
		if err := fn(c); err != nil {
			return true, err
		}
		return c.Done, nil
	})
	if final != nil {
		return leg{err: final}
	}
	if err != nil {
		if ctx.Err() != nil {
			return leg{err: fmt.Errorf("router: %s %s: %w", w.role, w.name, context.Cause(ctx))}
		}
		return leg{err: fmt.Errorf("router: %s %s: %w: %w", w.role, w.name, gen.ErrInternal, err), transport: true}
	}
	return leg{}
}

// reqLog is a request's logger with its attributes, built on first use: slog's With
// formats the attributes at once, and at the usual levels most requests log nothing.
// One goroutine (the request's) uses it.
type reqLog struct {
	base  *slog.Logger
	attrs []any
	l     *slog.Logger
}

func (l *reqLog) with(attrs ...any) *reqLog {
	return &reqLog{base: l.base, attrs: append(append([]any(nil), l.attrs...), attrs...)}
}

func (l *reqLog) enabled(level slog.Level) bool { return l.base.Enabled(context.Background(), level) }

func (l *reqLog) log(level slog.Level, msg string, args ...any) {
	if !l.enabled(level) {
		return
	}
	if l.l == nil {
		l.l = l.base.With(l.attrs...)
	}
	l.l.Log(context.Background(), level, msg, args...)
}

func (l *reqLog) Info(msg string, args ...any) { l.log(slog.LevelInfo, msg, args...) }
func (l *reqLog) Warn(msg string, args ...any) { l.log(slog.LevelWarn, msg, args...) }
