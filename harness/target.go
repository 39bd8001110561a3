package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"pdsoak/scenarios"
)

// Target is a reachable endpoint under test and what the runner may ask of it.
type Target interface {
	// URL is the base URL requests go to.
	URL() string
	// MetricsSources lists Prometheus endpoints scraped for samples and the leak check.
	MetricsSources() []DebugSource
	// DebugSources lists /debug/requests endpoints consulted on silent drops.
	DebugSources() []DebugSource
	// Handle is the launcher's topology for fault injection (nil for external targets).
	Handle() any
	// Stop stops whatever the harness started (nothing for an external target).
	Stop(ctx context.Context) error
}

// externalTarget is an endpoint the harness did not start.
type externalTarget struct {
	url     string
	metrics []DebugSource
	debug   []DebugSource
}

func (t *externalTarget) URL() string                    { return t.url }
func (t *externalTarget) MetricsSources() []DebugSource  { return t.metrics }
func (t *externalTarget) DebugSources() []DebugSource    { return t.debug }
func (t *externalTarget) Handle() any                    { return nil }
func (t *externalTarget) Stop(ctx context.Context) error { return nil }

// ReachTimeout bounds the reachability check of an external target.
var ReachTimeout = 10 * time.Second

// openExternal checks that the target accepts TCP connections and discovers its
// /debug/requests endpoint when the scenario does not name one.
func openExternal(ctx context.Context, sc *scenarios.Scenario, hc *http.Client) (*externalTarget, error) {
	u, err := url.Parse(sc.Target.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("harness: target url %q: %w", sc.Target.URL, ErrInfrastructure)
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	if err := waitDial(ctx, host, ReachTimeout); err != nil {
		return nil, fmt.Errorf("harness: target %s unreachable: %v: %w", sc.Target.URL, err, ErrInfrastructure)
	}
	t := &externalTarget{url: strings.TrimRight(sc.Target.URL, "/")}
	if sc.Target.MetricsURL != "" {
		t.metrics = []DebugSource{{Process: "target", URL: sc.Target.MetricsURL}}
	}
	switch {
	case sc.Target.DebugURL != "":
		t.debug = []DebugSource{{Process: "target", URL: sc.Target.DebugURL}}
	default:
		// Probe the conventional path once; a target without it simply has none.
		probe := t.url + "/debug/requests"
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := fetchDebug(pctx, hc, probe); err == nil {
			t.debug = []DebugSource{{Process: "target", URL: probe}}
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
		select {
		case <-ctx.Done():
			return last
		case <-time.After(200 * time.Millisecond):
		}
	}
}
