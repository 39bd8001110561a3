package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"pdsoak/harness"
	"pdsoak/harness/telemetry"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// telemetryCloseBound bounds the final remote-write push and the span flush at the end.
const telemetryCloseBound = 15 * time.Second

// telemetryFlags are run's live outputs: --metrics-listen, --prometheus-remote-write,
// --otlp-endpoint.
type telemetryFlags struct {
	listen, remoteWrite, otlp string
	instance                  string
	interval                  time.Duration
}

func (f *telemetryFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "metrics-listen", "", "serve the run's live Prometheus series (pdsoak_*) on http://ADDR/metrics until its reports are written, e.g. 127.0.0.1:9464")
	fs.StringVar(&f.remoteWrite, "prometheus-remote-write", "", "push the same series to this Prometheus remote-write URL (remote write 1.0, e.g. http://prometheus:9090/api/v1/write) every --remote-write-interval and once at the end")
	fs.StringVar(&f.instance, "remote-write-instance", "", "the instance label of every pushed series (default: HOST:PID), so that runs pushing at once write series of their own")
	fs.DurationVar(&f.interval, "remote-write-interval", telemetry.DefaultPushInterval, "how often --prometheus-remote-write pushes")
	fs.StringVar(&f.otlp, "otlp-endpoint", "", "export one span per request over OTLP/HTTP to this endpoint (e.g. http://collector:4318), with the trace id each request's traceparent header carried")
}

// config checks the flags and turns them into a telemetry.Config; a bad value is a
// usage error naming the flag.
func (f *telemetryFlags) config(sc *scenarios.Scenario, sh harness.Shard, label string, log *slog.Logger) (telemetry.Config, error) {
	c := telemetry.Config{MetricsListen: f.listen, RemoteWrite: f.remoteWrite, OTLPEndpoint: f.otlp,
		RemoteWriteInterval: f.interval, Instance: f.instance, Logger: log,
		Labels: telemetry.Labels{Scenario: sc.Name, Seed: sc.Seed, Label: label}}
	if sh.Count > 0 {
		c.Labels.Shard = strconv.Itoa(sh.Index)
	}
	if f.listen != "" {
		if _, _, err := net.SplitHostPort(f.listen); err != nil {
			return c, usageError("--metrics-listen %q: want host:port (e.g. 127.0.0.1:9464): %v", f.listen, err)
		}
	}
	for _, u := range []struct{ flag, val string }{{"--prometheus-remote-write", f.remoteWrite}, {"--otlp-endpoint", f.otlp}} {
		if u.val == "" {
			continue
		}
		p, err := url.Parse(u.val)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return c, usageError("%s %q: want an http:// or https:// URL with a host", u.flag, u.val)
		}
	}
	if f.instance != "" && f.remoteWrite == "" {
		return c, usageError("--remote-write-instance %q: needs --prometheus-remote-write", f.instance)
	}
	if !utf8.ValidString(f.instance) {
		return c, usageError("--remote-write-instance %q: not UTF-8 (Prometheus refuses such a label value)", f.instance)
	}
	if f.remoteWrite != "" && f.interval <= 0 {
		return c, usageError("--remote-write-interval %v: must be positive", f.interval)
	}
	return c, nil
}

// runTelemetry is one run's live outputs as the CLI holds them.
type runTelemetry struct {
	t      *telemetry.Telemetry
	stderr io.Writer
}

// startTelemetry opens the configured outputs (none: a nil *runTelemetry, which does
// nothing). A listener that cannot bind is a usage error.
func (f *telemetryFlags) start(ctx context.Context, sc *scenarios.Scenario, sh harness.Shard, label string, log *slog.Logger, stdout, stderr io.Writer, quiet bool) (*runTelemetry, error) {
	c, err := f.config(sc, sh, label, log)
	if err != nil || !c.Enabled() {
		return nil, err
	}
	t, err := telemetry.Start(ctx, c)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("harness: %w", err)}
	}
	if addr := t.MetricsAddr(); addr != "" && !quiet {
		fmt.Fprintf(stdout, "harness: live metrics on http://%s/metrics\n", addr)
	}
	return &runTelemetry{t: t, stderr: stderr}, nil
}

// observe chains the telemetry after next (either may be nil).
func (r *runTelemetry) observe(next func(ledger.Event)) func(ledger.Event) {
	if r == nil {
		return next
	}
	return func(ev ledger.Event) {
		if next != nil {
			next(ev)
		}
		r.t.Observe(ev)
	}
}

// close makes the final push and flush and stops the listener; a failure is a warning,
// never a change of verdict.
func (r *runTelemetry) close() {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), telemetryCloseBound)
	defer cancel()
	if err := r.t.Close(ctx); err != nil {
		fmt.Fprintln(r.stderr, "harness: warning: telemetry:", err)
	}
}

// runLabel is --label ("" when h is nil).
func (h *historyFlags) runLabel() string {
	if h == nil {
		return ""
	}
	return h.label
}
