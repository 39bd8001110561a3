package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Listener serves /metrics from a gatherer until closed.
type Listener struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Listen binds addr (host:port; port 0 picks one) and serves GET /metrics on it.
func Listen(addr string, g prometheus.Gatherer) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	l := &Listener{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() { l.done <- l.srv.Serve(ln) }()
	return l, nil
}

// Addr is the bound address (host:port).
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close stops serving, letting a scrape in progress finish within ctx.
func (l *Listener) Close(ctx context.Context) error {
	err := l.srv.Shutdown(ctx)
	if serr := <-l.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("telemetry: metrics listener: %w", err)
	}
	return nil
}
