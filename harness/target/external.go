package target

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"pdsoak/scenarios"
)

// External is an endpoint the harness did not start.
type External struct {
	url     string
	metrics []Source
	debug   []Source
}

// URL implements Target.
func (t *External) URL() string { return t.url }

// MetricsSources implements Target: target.metrics_url, target.metrics_urls and (for a
// launched target) every launched process's metrics_url.
func (t *External) MetricsSources() []Source { return t.metrics }

// DebugSources implements Target: target.debug_url, or <url>/debug/requests when the
// debug probe accepted it.
func (t *External) DebugSources() []Source { return t.debug }

// Stop implements Target: nothing to stop.
func (t *External) Stop(context.Context) error { return nil }

// OpenExternal checks that tgt.URL accepts TCP connections within the reach timeout and
// discovers its /debug/requests endpoint when tgt names none.
func OpenExternal(ctx context.Context, tgt scenarios.Target, opts ...Option) (*External, error) {
	cfg := newConfig(opts)
	u, err := url.Parse(tgt.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("target: bad url %q", tgt.URL)
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	if err := waitDial(ctx, host, cfg.reachTimeout); err != nil {
		return nil, fmt.Errorf("target: %s unreachable: %w", tgt.URL, err)
	}
	t := &External{url: strings.TrimRight(tgt.URL, "/")}
	if tgt.MetricsURL != "" {
		t.metrics = []Source{{Process: "target", URL: tgt.MetricsURL}}
	}
	// One endpoint per process of the deployment, in name order.
	for _, name := range slices.Sorted(maps.Keys(tgt.MetricsURLs)) {
		t.metrics = append(t.metrics, Source{Process: name, URL: tgt.MetricsURLs[name]})
	}
	switch {
	case tgt.DebugURL != "":
		t.debug = []Source{{Process: "target", URL: tgt.DebugURL}}
	case cfg.probe != nil:
		// Probe the conventional path once; a target without it simply has none.
		probe := t.url + "/debug/requests"
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := cfg.probe(pctx, probe); err == nil {
			t.debug = []Source{{Process: "target", URL: probe}}
		}
	}
	return t, nil
}

// waitDial retries a TCP connect until it succeeds or the bound passes.
func waitDial(ctx context.Context, addr string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var last error
	for {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		last = err
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return last
		case <-t.C:
		}
	}
}
