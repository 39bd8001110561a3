package harness

import (
	"fmt"

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
