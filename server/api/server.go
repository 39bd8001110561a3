package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Defaults of the Server options.
const (
	// DefaultReadHeaderTimeout closes connections whose headers dribble in (slow loris).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included. Responses are
	// not bounded (streams may be long): there is no write timeout.
	DefaultReadTimeout = 60 * time.Second
	// DefaultIdleTimeout closes idle keep-alive connections.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultShutdownGrace is how long Shutdown lets in-flight requests finish before it
	// aborts them.
	DefaultShutdownGrace = 30 * time.Second
	// DefaultAbortWait is how long Shutdown waits, after aborting, for handlers to send
	// their errors before it closes the remaining connections.
	DefaultAbortWait = 10 * time.Second
)

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithReadHeaderTimeout sets http.Server.ReadHeaderTimeout.
func WithReadHeaderTimeout(d time.Duration) ServerOption {
	return func(s *Server) { s.srv.ReadHeaderTimeout = d }
}

// WithReadTimeout sets http.Server.ReadTimeout.
func WithReadTimeout(d time.Duration) ServerOption { return func(s *Server) { s.srv.ReadTimeout = d } }

// WithIdleTimeout sets http.Server.IdleTimeout.
func WithIdleTimeout(d time.Duration) ServerOption { return func(s *Server) { s.srv.IdleTimeout = d } }

// WithShutdownGrace sets how long in-flight requests may run on after Shutdown begins.
func WithShutdownGrace(d time.Duration) ServerOption { return func(s *Server) { s.grace = d } }

// WithAbortWait sets how long aborted requests have to end before connections are closed.
func WithAbortWait(d time.Duration) ServerOption { return func(s *Server) { s.abortWait = d } }

// WithServerLogger sets the logger of the server's own messages.
func WithServerLogger(l *slog.Logger) ServerOption { return func(s *Server) { s.log = l } }

// WithLeanGenerate serves the worker endpoint POST /generate on the package's own
// connection code when the handler is a *Handler: the requests the PD router sends
// cost a worker far less CPU than through net/http, with the same bytes on the wire;
// every other request (any other path, anything unusual) is still net/http's, on the
// same listener (see leanServer).
func WithLeanGenerate() ServerOption { return WithLeanPaths("/generate") }

// WithLeanPaths serves POST requests to paths on the lean connection code (see
// WithLeanGenerate); the router's front end uses it for the OpenAI generation endpoints.
func WithLeanPaths(paths ...string) ServerOption {
	return func(s *Server) { s.leanPaths = append(s.leanPaths, paths...) }
}

// drainer is implemented by *Handler; other handlers are shut down without it.
type drainer interface {
	Drain()
	Abort()
}

// Server is an http.Server with the timeouts and the shutdown of a reference worker.
//
// Shutdown stops accepting connections, makes the handler refuse new generations (503)
// and fail /health, waits up to the grace period for in-flight requests to finish, then
// aborts the rest (each client gets an explicit error: a 503, or an SSE error event),
// waits up to the abort wait for those errors to be written, and finally closes every
// connection that remains.
type Server struct {
	srv       *http.Server
	handler   http.Handler
	grace     time.Duration
	abortWait time.Duration
	log       *slog.Logger

	leanPaths []string    // POST paths the lean server answers
	lean      *leanServer // nil: net/http serves everything
}

// NewServer wraps h.
func NewServer(h http.Handler, opts ...ServerOption) *Server {
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: DefaultReadHeaderTimeout,
			ReadTimeout:       DefaultReadTimeout,
			IdleTimeout:       DefaultIdleTimeout,
			MaxHeaderBytes:    64 << 10,
		},
		handler:   h,
		grace:     DefaultShutdownGrace,
		abortWait: DefaultAbortWait,
		log:       slog.Default(),
	}
	for _, o := range opts {
		o(s)
	}
	s.srv.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	if h, ok := h.(*Handler); ok && len(s.leanPaths) > 0 {
		s.lean = newLeanServer(h, s.srv, s.log, s.leanPaths)
	}
	return s
}

// Serve accepts connections on ln until Shutdown; it returns nil after a shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if s.lean == nil {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("api: serve: %w", err)
		}
		return nil
	}
	s.lean.hand = newHandoff(ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.lean.hand) }()
	err := s.lean.serve(ln)
	if err != nil {
		_ = s.srv.Close() // net/http's loop ends with the listener it was handed from
		s.lean.closeAll()
	}
	if herr := <-errc; herr != nil && !errors.Is(herr, http.ErrServerClosed) && err == nil {
		err = herr
	}
	if err != nil {
		return fmt.Errorf("api: serve: %w", err)
	}
	return nil
}

// shutdown is http.Server.Shutdown over both servers.
func (s *Server) shutdown(ctx context.Context) error {
	if s.lean == nil {
		return s.srv.Shutdown(ctx)
	}
	// The lean server first: until its connections are gone, a head one of them hands to
	// net/http during the drain must find net/http serving, not a closed hand-off; it
	// answers as in its shutdown (each response the last on its connection).
	s.srv.SetKeepAlivesEnabled(false)
	err := s.lean.shutdown(ctx)
	if herr := s.srv.Shutdown(ctx); err == nil {
		err = herr
	}
	return err
}

// Shutdown stops the server as described on Server. ctx can cut the whole sequence
// short (the remaining connections are then closed at once).
func (s *Server) Shutdown(ctx context.Context) error {
	d, _ := s.handler.(drainer)
	if d != nil {
		d.Drain()
	}
	graceCtx, cancel := context.WithTimeout(ctx, s.grace)
	err := s.shutdown(graceCtx)
	cancel()
	if err == nil {
		return nil
	}
	s.log.Warn("api: shutdown grace expired; aborting in-flight requests", "grace", s.grace)
	if d != nil {
		d.Abort()
		abortCtx, cancel := context.WithTimeout(ctx, s.abortWait)
		err = s.shutdown(abortCtx)
		cancel()
		if err == nil {
			return nil
		}
	}
	s.log.Warn("api: closing connections that did not finish after the abort", "abort_wait", s.abortWait)
	if s.lean != nil {
		s.lean.closeAll()
	}
	if cerr := s.srv.Close(); cerr != nil {
		return fmt.Errorf("api: close: %w", cerr)
	}
	return nil
}

// Serve serves h on ln until ctx is done, then shuts down gracefully (see Server). It
// returns the first serving error, or nil after a clean shutdown.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, opts ...ServerOption) error {
	s := NewServer(h, opts...)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// The shutdown has its own bounds; ctx is already done, so it must not cut them.
	err := s.Shutdown(context.WithoutCancel(ctx))
	if serr := <-errc; serr != nil && err == nil {
		err = serr
	}
	return err
}
