package router

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
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
	all             []*worker // prefill then decode: the Flow's numbering

	rng  *rand.Rand // WithSeed's; the pool draws from it
	core *Core      // the pool, the Flows' configuration, the health checks (core.go)

	reqMu sync.Mutex // guards reqs and what Flow.Info reads
	reqs  map[uint64]*flowDriver
	seq   uint64

	metrics *metrics
	stop    context.CancelFunc
	done    chan struct{}
	closed  atomic.Bool
}

// New builds a router over the given workers. Call Start to begin health checking.
func New(prefill, decode []Worker, opts ...Option) (*Router, error) {
	if len(prefill) == 0 || len(decode) == 0 {
		return nil, fmt.Errorf("router: need at least one prefill and one decode worker (got %d, %d)", len(prefill), len(decode))
	}
	r := configure(opts)
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
			t, lean := parseLegTarget(u)
			wk := &worker{url: u, target: t, lean: lean, explicitBoot: w.BootstrapAddr != ""}
			wk.init(role, fmt.Sprintf("%s-%d", role, i), w.BootstrapAddr) // unhealthy until the first check passes
			out = append(out, wk)
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
	r.all = append(append([]*worker(nil), r.prefill...), r.decode...)
	states := make([]*WorkerState, len(r.all))
	for i, w := range r.all {
		states[i] = &w.WorkerState
	}
	r.core = r.newCore(states, len(r.prefill))
	r.metrics = newMetrics(r)
	return r, nil
}

// Gatherer serves the router's own metrics.
func (r *Router) Gatherer() prometheus.Gatherer { return r.metrics.reg }

// Start runs the first round of health checks (bounded by the health timeout) and then
// keeps checking, on the schedule of HealthChecks, until Close.
func (r *Router) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	next := r.checkAll(ctx)
	go func() {
		defer close(r.done)
		t := time.NewTimer(time.Until(next))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				next = r.checkAll(ctx)
				if r.legs != nil {
					r.legs.reap()
				}
				t.Reset(time.Until(next))
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
	label := func(w int) string { return r.worker(w).url }
	r.reqMu.Lock()
	out := make([]gen.RequestInfo, 0, len(r.reqs))
	for _, d := range r.reqs {
		out = append(out, d.f.Info(now, label))
	}
	r.reqMu.Unlock()
	SortRequests(out)
	return out
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
	d := &flowDriver{Pool: r.core.Pool, r: r, ctx: ctx, out: make(chan gen.Event, 16), start: time.Now()}
	var attrs []any
	if tp, ok := traceparent.FromContext(ctx); ok {
		attrs = []any{"trace_id", tp.TraceIDHex()}
	}
	d.f.Init(d, &r.core.Flow, req, &r.reqMu, attrs...)
	r.reqMu.Lock()
	r.seq++
	d.key = r.seq
	r.reqs[d.key] = d
	r.reqMu.Unlock()
	go d.run()
	return d.out, nil
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
