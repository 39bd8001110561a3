package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"pdsoak/kernels"
	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
	"pdsoak/server/kvpool"
	"pdsoak/server/scheduler"
)

// Engine runs one worker: a scheduler and a backend driven by a single loop goroutine.
// It implements gen.Generator and gen.Inspector.
type Engine struct {
	b     kernels.Backend
	info  kernels.ModelInfo
	cfg   Config
	res   resolved
	log   *slog.Logger
	clock Clock
	tick  time.Duration
	reg   prometheus.Registerer
	gath  prometheus.Gatherer
	m     *metrics
	xfer  Transfer

	// Loop-owned.
	core    *Core
	sched   *scheduler.Scheduler // the core's
	streams map[uint64]*stream
	behind  map[uint64]*stream // streams with tokens their channel had no room for
	// gate answers a held step: the engine/step failpoint's evaluation (nil: none).
	gate     chan gateResult
	draining bool
	// retractLog bounds the retraction warnings; retractsUnlogged counts the
	// retractions since the last one.
	retractLog       *rate.Limiter
	retractsUnlogged int

	// Inbox: any goroutine appends, the loop drains.
	mu    sync.Mutex
	inbox []any
	wake  chan struct{}

	started   atomic.Bool
	closing   atomic.Bool
	loopCtx   context.Context
	loopStop  context.CancelFunc
	drainReq  chan struct{}
	forceReq  chan struct{}
	done      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once
	forceOnce sync.Once

	// Published by the loop for other goroutines.
	progressAt atomic.Int64 // unix nanos of the last progress
	outputAt   atomic.Int64 // unix nanos of the last token streamed
	stepAt     atomic.Int64 // unix nanos when the current step started (0: none)
	live       atomic.Int64
	snapMu     sync.Mutex
	snap       []gen.RequestInfo
	snapTime   time.Time
	snapDone   chan struct{} // closed (and replaced) when snap is rebuilt
	snapWant   atomic.Bool   // a Requests call waits for a fresh snap
	schedErr   error
	stats      scheduler.Stats
}

var (
	_ gen.Generator = (*Engine)(nil)
	_ gen.Inspector = (*Engine)(nil)
)

// resolved holds the pool and the timeouts in force (0: off).
type resolved struct {
	pages, pageSize int
	scheduler.Bounds
}

// PoolPages is the KV pool size in pages for cfg and a backend described by info: from
// MaxTotalTokens, else MemFractionStatic × DeviceMemoryGB ÷ info.ModelKVBytesPerToken.
// It returns 0 and no error when neither is set (the engine then uses the whole KV store
// of the backend). Servers size kernels.Config.NumPages with it before kernels.New.
func PoolPages(cfg Config, info kernels.ModelInfo, pageSize int) (int, error) {
	if cfg.MaxTotalTokens == 0 && cfg.DeviceMemoryGB == 0 {
		return 0, nil
	}
	n, err := kvpool.Capacity(kvpool.CapacityConfig{MaxTotalTokens: cfg.MaxTotalTokens,
		MemFractionStatic: cfg.MemFractionStatic, DeviceMemoryGB: cfg.DeviceMemoryGB, PageSize: pageSize}, info)
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	return n, nil
}

// New validates cfg, sizes the KV pool and registers the metrics. Call Start to run it.
func New(b kernels.Backend, cfg Config, opts ...Option) (*Engine, error) {
	if b == nil {
		return nil, errors.New("engine: nil backend")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, fn := range opts {
		fn(&o)
	}
	e := &Engine{b: b, info: b.Info(), cfg: cfg, res: resolved{Bounds: cfg.Bounds()}, log: o.logger, clock: o.clock,
		tick: o.tick, xfer: o.transfer, streams: map[uint64]*stream{}, behind: map[uint64]*stream{}, wake: make(chan struct{}, 1),
		drainReq: make(chan struct{}), forceReq: make(chan struct{}), done: make(chan struct{}), snapDone: make(chan struct{})}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.log = e.log.With("component", "engine", "role", string(cfg.Role))
	if e.clock == nil {
		e.clock = realClock{}
	}
	if e.tick <= 0 {
		e.tick = DefaultTickInterval
	}
	if o.warnEvery <= 0 {
		o.warnEvery = DefaultWarnEvery
	}
	e.retractLog = rate.NewLimiter(rate.Every(o.warnEvery), 1)
	kv := b.KV()
	if kv == nil {
		return nil, errors.New("engine: backend has no KV store")
	}
	e.res.pageSize = cfg.PageSize
	if e.res.pageSize == 0 {
		e.res.pageSize = kv.PageSize
	}
	if e.res.pageSize != kv.PageSize {
		return nil, fmt.Errorf("engine: --page-size %d differs from the backend's KV store page size %d", e.res.pageSize, kv.PageSize)
	}
	pages, err := PoolPages(cfg, e.info, e.res.pageSize)
	if err != nil {
		return nil, err
	}
	if pages == 0 {
		pages = kv.NumPages
	}
	if pages > kv.NumPages {
		return nil, fmt.Errorf("engine: the KV pool needs %d pages but the backend's KV store has %d; size kernels.Config.NumPages with engine.PoolPages", pages, kv.NumPages)
	}
	e.res.pages = pages
	if cfg.Role != RoleColocated && e.xfer == nil {
		return nil, fmt.Errorf("engine: the %s role needs WithTransfer", cfg.Role)
	}
	e.core, err = NewCore(b, CoreConfig{Config: cfg, PageSize: e.res.pageSize, Pages: pages, Now: e.clock.Now,
		Tick: e.tick, Log: e.log}, (*loopHost)(e))
	if err != nil {
		return nil, err
	}
	e.sched = e.core.Scheduler()
	e.reg = o.reg
	if e.reg == nil {
		r := prometheus.NewRegistry()
		e.reg, e.gath = r, r
	} else if g, ok := e.reg.(prometheus.Gatherer); ok {
		e.gath = g
	}
	if e.m, err = newMetrics(e.reg); err != nil {
		return nil, fmt.Errorf("engine: metrics: %w", err)
	}
	st := e.sched.Stats()
	e.m.setStats(st)
	e.stats = st
	if e.xfer != nil {
		e.xfer.Bind(sink{e})
	}
	e.loopCtx, e.loopStop = context.WithCancel(context.Background())
	return e, nil
}

// Info is the backend's model description (name, vocabulary, BOS/EOS).
func (e *Engine) Info() kernels.ModelInfo { return e.info }

// Config returns the configuration the engine was built with.
func (e *Engine) Config() Config { return e.cfg }

// Pages is the KV pool capacity in pages.
func (e *Engine) Pages() int { return e.res.pages }

// Gatherer returns the registry holding the engine's metrics when it is one (the
// default private registry, or a WithRegisterer value that is also a Gatherer).
func (e *Engine) Gatherer() prometheus.Gatherer { return e.gath }

// Stats is the last queue and pool snapshot the loop published.
func (e *Engine) Stats() scheduler.Stats {
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	return e.stats
}

// Start launches the loop goroutine. It is a no-op after the first call.
func (e *Engine) Start() {
	e.startOnce.Do(func() {
		now := e.clock.Now().UnixNano()
		e.progressAt.Store(now)
		e.outputAt.Store(now)
		e.started.Store(true)
		go e.loop()
	})
}

// Shutdown stops admission (Generate then fails with gen.ErrUnavailable), lets in-flight
// requests finish until ctx ends, fails the rest with gen.ErrAborted, and returns once
// the loop has exited: nil when everything finished, ctx's error when requests had to be
// failed.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.closing.Store(true)
	if !e.started.Load() {
		e.startOnce.Do(func() { close(e.done) }) // never started: nothing to drain
		e.loopStop()
		return nil
	}
	e.stopOnce.Do(func() { close(e.drainReq) })
	select {
	case <-e.done:
		e.loopStop()
		return nil
	case <-ctx.Done():
	}
	e.forceOnce.Do(func() { close(e.forceReq); e.loopStop() })
	<-e.done
	return ctx.Err()
}

// post appends an event to the inbox and wakes the loop. It never blocks.
func (e *Engine) post(ev any) {
	e.mu.Lock()
	e.inbox = append(e.inbox, ev)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

type arrival struct {
	ctx   context.Context
	req   *gen.Request
	mu    sync.Mutex
	gone  bool // Generate gave up waiting
	reply chan admitResult
}

type admitResult struct {
	seq uint64
	ch  <-chan gen.Event
	err error
}

type abortEv struct {
	seq   uint64
	cause error
}

type registeredEv struct{ room uint64 }

type receivedEv struct {
	room uint64
	tok  int
	err  error
}

type sentEv struct {
	room uint64
	err  error
}

// Generate admits req or refuses it at once (overload, invalid, context length,
// unavailable). The channel gets token events and exactly one Done event, then closes.
// Cancelling ctx aborts the request.
func (e *Engine) Generate(ctx context.Context, req *gen.Request) (<-chan gen.Event, error) {
	if !e.started.Load() {
		return nil, fmt.Errorf("engine: not started: %w", gen.ErrUnavailable)
	}
	if e.closing.Load() {
		return nil, fmt.Errorf("engine: shutting down: %w", gen.ErrUnavailable)
	}
	if req == nil {
		return nil, fmt.Errorf("engine: nil request: %w", gen.ErrInvalid)
	}
	if arg, err := failpoint.Eval(ctx, failpoint.EngineAdmit); err != nil {
		return nil, fmt.Errorf("engine: admission: %w: %w", gen.ErrAborted, err)
	} else if arg != "" {
		err := AdmitFailpointError(arg)
		e.m.refused.WithLabelValues(gen.ErrorKind(err)).Inc()
		return nil, err
	}
	a := &arrival{ctx: ctx, req: req, reply: make(chan admitResult, 1)}
	e.post(a)
	var timeout <-chan time.Time
	if e.cfg.Semantics == SemanticsStrict && e.res.Watchdog > 0 {
		timeout = e.clock.After(e.res.Watchdog)
	}
	var cause error
	select {
	case r := <-a.reply:
		return r.ch, r.err
	case <-ctx.Done():
		cause = fmt.Errorf("engine: admission: %w: %w", gen.ErrAborted, ctx.Err())
	case <-e.done:
		cause = fmt.Errorf("engine: stopped: %w", gen.ErrUnavailable)
	case <-timeout:
		cause = fmt.Errorf("engine: scheduler did not answer within %s: %w", e.res.Watchdog, gen.ErrUnavailable)
	}
	a.mu.Lock()
	a.gone = true
	a.mu.Unlock()
	select {
	case r := <-a.reply: // admitted just before we gave up: undo it
		if r.err == nil {
			e.post(abortEv{seq: r.seq, cause: cause})
		}
	default:
	}
	return nil, cause
}

// AdmitFailpointError turns the argument of a return(...) term of engine/admit into a
// refusal (the simulator's workers refuse with it too).
func AdmitFailpointError(arg string) error {
	switch arg {
	case "overloaded":
		return &gen.OverloadError{RetryAfter: time.Second, Reason: "engine: failpoint engine/admit"}
	case "unavailable":
		return fmt.Errorf("engine: failpoint engine/admit: %w", gen.ErrUnavailable)
	case "timeout":
		return fmt.Errorf("engine: failpoint engine/admit: %w", gen.ErrTimeout)
	}
	return fmt.Errorf("engine: failpoint engine/admit (%s): %w", arg, gen.ErrInternal)
}

// requestsWait bounds how long Requests waits for the loop to list the requests before
// it answers from the last list instead.
const requestsWait = 100 * time.Millisecond

// Requests lists every in-flight request (for /debug/requests). The loop lists them on
// request; when it does not within requestsWait (it is stalled, or not running) the
// answer is its last list, aged to now.
func (e *Engine) Requests() []gen.RequestInfo {
	if e.started.Load() {
		e.snapMu.Lock()
		fresh := e.snapDone
		e.snapMu.Unlock()
		e.snapWant.Store(true)
		select {
		case e.wake <- struct{}{}:
		default:
		}
		t := time.NewTimer(requestsWait)
		select {
		case <-fresh:
		case <-t.C:
		case <-e.done:
		}
		t.Stop()
	}
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	return AgeRequests(e.snap, e.snapTime, e.clock.Now())
}

// Healthy returns nil, or why /health must fail: the watchdog (scheduler.WatchdogErr),
// else the scheduler's own health as the loop last published it.
func (e *Engine) Healthy() error {
	if !e.started.Load() {
		return fmt.Errorf("engine: not started: %w", gen.ErrUnavailable)
	}
	if e.closing.Load() {
		return fmt.Errorf("engine: shutting down: %w", gen.ErrUnavailable)
	}
	// The scheduler's watchdog rule on what the loop published: it answers while the
	// loop itself is stuck (a step or a dial that does not return).
	w := scheduler.Watch{Progress: time.Unix(0, e.progressAt.Load()), Output: time.Unix(0, e.outputAt.Load()), Live: int(e.live.Load())}
	if s := e.stepAt.Load(); s != 0 {
		w.Step = time.Unix(0, s)
	}
	if err := scheduler.WatchdogErr(e.cfg.Semantics, e.res.Watchdog, e.clock.Now(), w); err != nil {
		return err
	}
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	return e.schedErr
}

// sink receives transfer events from the Transfer implementation.
type sink struct{ e *Engine }

func (s sink) Registered(room uint64, pages int) { s.e.post(registeredEv{room: room}) }
func (s sink) Received(room uint64, firstToken int, err error) {
	s.e.post(receivedEv{room: room, tok: firstToken, err: err})
}
func (s sink) Sent(room uint64, err error) { s.e.post(sentEv{room: room, err: err}) }
