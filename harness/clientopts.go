package harness

import (
	"fmt"
	"net/http"
	"net/url"

	"pdsoak/harness/client"
	"pdsoak/scenarios"
)

// clientOptions is how the scenario configures the request client: the connect bound,
// target.headers, target.tls and target.idle_timeout.
func clientOptions(sc *scenarios.Scenario) ([]client.Option, error) {
	opts := []client.Option{client.WithTransport(client.NewTransport(sc.Deadlines.Connect.D()))}
	if h := sc.Target.Headers.HTTP(nil); h != nil {
		opts = append(opts, client.WithHeader(h))
	}
	if d := sc.Target.IdleTimeout.D(); d > 0 {
		opts = append(opts, client.WithIdleTimeout(d))
	}
	cfg, err := scenarios.TLSConfig(sc.Target.TLS)
	if err != nil {
		return nil, fmt.Errorf("harness: target.tls: %w", err)
	}
	if cfg != nil {
		opts = append(opts, client.WithTLS(cfg))
	}
	return opts, nil
}

// auxTransport is the transport of the run's auxiliary GETs (target info, debug,
// metrics): target.tls applies, and target.headers go with every GET to the target's own
// host — never to another one (a Prometheus elsewhere must not receive the API key).
func auxTransport(sc *scenarios.Scenario) http.RoundTripper {
	tr := client.NewTransport(sc.Deadlines.Connect.D())
	if cfg, err := scenarios.TLSConfig(sc.Target.TLS); err == nil && cfg != nil {
		tr.TLSClientConfig = cfg
	}
	h := sc.Target.Headers.HTTP(nil)
	u, err := url.Parse(sc.Target.URL)
	if h == nil || err != nil || u.Host == "" {
		return tr
	}
	return &targetHeaders{base: tr, host: u.Host, h: h}
}

// targetHeaders adds headers to requests for one host.
type targetHeaders struct {
	base *http.Transport
	host string
	h    http.Header
}

func (t *targetHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	for k, v := range t.h {
		if _, set := req.Header[k]; !set {
			req.Header[k] = v
		}
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the transport.
func (t *targetHeaders) CloseIdleConnections() { t.base.CloseIdleConnections() }
