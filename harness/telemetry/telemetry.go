package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"time"

	"pdsoak/ledger"
)

// Config says which outputs a run's telemetry has; the zero value has none.
type Config struct {
	// MetricsListen is the /metrics listen address ("": none).
	MetricsListen string
	// RemoteWrite is the Prometheus remote-write URL ("": none).
	RemoteWrite string
	// RemoteWriteInterval is the push period (0: DefaultPushInterval).
	RemoteWriteInterval time.Duration
	// OTLPEndpoint is the OTLP/HTTP endpoint of the span exporter ("": none).
	OTLPEndpoint string
	Labels       Labels
	// Instance is the instance label of every pushed series ("": DefaultInstance).
	Instance string
	Logger   *slog.Logger
}

// PushJob is the job label of every pushed series.
const PushJob = "pdsoak"

// DefaultInstance is the instance label a run's pushed series carry: this host and
// process. Why pushed series need one: a scrape gets job and instance from Prometheus,
// a push from nobody, and two runs of one scenario pushing at once (two CI jobs, a
// nightly on two machines) wrote the same series: Prometheus kept one counter that each
// run overwrote in turn, and a query saw 12 of the two runs' 36 requests.
func DefaultInstance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// Enabled reports whether any output is configured.
func (c Config) Enabled() bool {
	return c.MetricsListen != "" || c.RemoteWrite != "" || c.OTLPEndpoint != ""
}

// Telemetry is one run's live outputs, fed from the ledger's event stream.
type Telemetry struct {
	metrics  *Metrics
	listener *Listener
	pusher   *Pusher
	tracer   *Tracer
}

// Start opens every configured output. On error nothing is left open.
func Start(ctx context.Context, c Config) (_ *Telemetry, err error) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Telemetry{metrics: NewMetrics(c.Labels, c.MetricsListen != "")}
	defer func() {
		if err != nil {
			_ = t.Close(ctx)
		}
	}()
	if c.MetricsListen != "" {
		if t.listener, err = Listen(c.MetricsListen, t.metrics.Gatherer()); err != nil {
			return nil, err
		}
		log.Info("metrics listener up", "addr", t.listener.Addr())
	}
	if c.RemoteWrite != "" {
		inst := c.Instance
		if inst == "" {
			inst = DefaultInstance()
		}
		opts := []PushOption{WithPushLogger(log), WithPushLabels(map[string]string{"job": PushJob, "instance": inst})}
		if c.RemoteWriteInterval > 0 {
			opts = append(opts, WithPushInterval(c.RemoteWriteInterval))
		}
		if t.pusher, err = NewPusher(c.RemoteWrite, t.metrics.Gatherer(), opts...); err != nil {
			return nil, err
		}
		t.pusher.Start()
	}
	if c.OTLPEndpoint != "" {
		if t.tracer, err = NewTracer(ctx, c.OTLPEndpoint, c.Labels, log); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Observe is the ledger's OnEvent hook: every event goes through it.
func (t *Telemetry) Observe(ev ledger.Event) {
	if t == nil {
		return
	}
	t.metrics.Observe(ev)
	if t.tracer != nil {
		t.tracer.Observe(ev)
	}
}

// MetricsAddr is the bound /metrics address ("" without a listener).
func (t *Telemetry) MetricsAddr() string {
	if t == nil || t.listener == nil {
		return ""
	}
	return t.listener.Addr()
}

// Metrics is the live registry.
func (t *Telemetry) Metrics() *Metrics { return t.metrics }

// Close makes the final remote-write push, flushes the spans and stops the listener,
// in that order, within ctx; it returns every error.
func (t *Telemetry) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.pusher != nil {
		errs = append(errs, t.pusher.Close(ctx))
		t.pusher = nil
	}
	if t.tracer != nil {
		errs = append(errs, t.tracer.Close(ctx))
		t.tracer = nil
	}
	if t.listener != nil {
		errs = append(errs, t.listener.Close(ctx))
		t.listener = nil
	}
	return errors.Join(errs...)
}
