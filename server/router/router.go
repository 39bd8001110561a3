package router

import (
	"context"
	"errors"
	"fmt"
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
