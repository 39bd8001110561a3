package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultPushInterval is how often a Pusher sends the series.
const DefaultPushInterval = 5 * time.Second

// DefaultPushTimeout bounds one push, retries included.
const DefaultPushTimeout = 10 * time.Second

// Pusher sends a gatherer's series to a Prometheus remote-write endpoint every interval
// and once more when closed, so the last values of the run are stored.
type Pusher struct {
	api      *remote.API
	g        prometheus.Gatherer
	interval time.Duration
	timeout  time.Duration
	now      func() time.Time
	log      *slog.Logger
	extra    map[string]string

	mu      sync.Mutex // one push at a time: a ticker push and the final one never race
	pushes  int
	bg      context.Context // the periodic pushes' context, cancelled by Close
	cancel  context.CancelFunc
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started bool
}

// PushOption configures a Pusher.
type PushOption func(*Pusher)

// WithPushInterval sets the period (default DefaultPushInterval).
func WithPushInterval(d time.Duration) PushOption { return func(p *Pusher) { p.interval = d } }

// WithPushTimeout bounds one push (default DefaultPushTimeout).
func WithPushTimeout(d time.Duration) PushOption { return func(p *Pusher) { p.timeout = d } }

// WithPushClock sets the clock that stamps the samples (default time.Now).
func WithPushClock(now func() time.Time) PushOption { return func(p *Pusher) { p.now = now } }

// WithPushLogger sets where failed pushes are logged (default: discarded).
func WithPushLogger(l *slog.Logger) PushOption { return func(p *Pusher) { p.log = l } }

// WithPushLabels adds labels to every pushed series.
func WithPushLabels(l map[string]string) PushOption { return func(p *Pusher) { p.extra = l } }

// NewPusher makes a pusher to url, the full remote-write URL (for Prometheus,
// http://host:9090/api/v1/write). It sends nothing until Start or Push.
func NewPusher(url string, g prometheus.Gatherer, opts ...PushOption) (*Pusher, error) {
	p := &Pusher{g: g, interval: DefaultPushInterval, timeout: DefaultPushTimeout, now: time.Now,
		log: slog.New(slog.DiscardHandler), stop: make(chan struct{}), done: make(chan struct{})}
	for _, o := range opts {
		o(p)
	}
	if p.interval <= 0 {
		return nil, fmt.Errorf("telemetry: remote write interval %v must be positive", p.interval)
	}
	p.bg, p.cancel = context.WithCancel(context.Background())
	// A few short retries: a push that cannot get through is retried at the next tick
	// with fresher values, not held for minutes.
	api, err := remote.NewAPI(url, remote.WithAPIPath(""), remote.WithAPIHTTPClient(&http.Client{Timeout: p.timeout}),
		remote.WithAPIBackoff(remote.BackoffConfig{Min: 100 * time.Millisecond, Max: time.Second, MaxRetries: 3}),
		remote.WithAPILogger(p.log))
	if err != nil {
		return nil, fmt.Errorf("telemetry: remote write URL %q: %w", url, err)
	}
	p.api = api
	return p, nil
}

// Push gathers and sends the series once.
func (p *Pusher) Push(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	mfs, err := p.g.Gather()
	if err != nil && len(mfs) == 0 {
		return fmt.Errorf("telemetry: gather: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req := &writeRequest{series: toSeries(mfs, p.now().UnixMilli(), p.extra)}
	// A retry that outlasts ctx (a 429's Retry-After, a slow 5xx) ends in ctx's error
	// alone; the collector's last answer says why.
	var last error
	if _, werr := p.api.Write(ctx, remote.WriteV1MessageType, req,
		remote.WithWriteRetryCallback(func(err error) { last = err })); werr != nil {
		if last != nil && ctx.Err() != nil {
			return fmt.Errorf("telemetry: remote write: %w (last answer: %s)", werr, strings.TrimSpace(last.Error()))
		}
		return fmt.Errorf("telemetry: remote write: %w", werr)
	}
	p.pushes++
	return nil
}

// Pushes is the number of successful pushes so far.
func (p *Pusher) Pushes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pushes
}

// Start pushes every interval in the background until Close.
func (p *Pusher) Start() {
	p.started = true
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				if err := p.Push(p.bg); err != nil {
					p.log.Warn("remote write failed", "err", err)
				}
			}
		}
	}()
}

// Close stops the ticker (when started) and makes the final push; its error is the
// final push's. A periodic push still in flight is abandoned (the final push has fresher
// values), so that a collector that does not answer cannot hold Close past ctx. Call it
// once, after Start if Start is called at all.
func (p *Pusher) Close(ctx context.Context) error {
	p.once.Do(func() { close(p.stop); p.cancel() })
	if p.started {
		<-p.done
	}
	return p.Push(ctx)
}
