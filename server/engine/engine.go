package engine

import (
	"context"
	"errors"
	"fmt"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

// Engine runs one worker: a scheduler and a backend driven by a single loop goroutine.
// It implements gen.Generator and gen.Inspector.
type Engine struct {
	b    kernels.Backend
	cfg  Config
	opts options
}

var (
	_ gen.Generator = (*Engine)(nil)
	_ gen.Inspector = (*Engine)(nil)
)

// New validates cfg, sizes the KV pool and registers the metrics. Call Start to run it.
func New(b kernels.Backend, cfg Config, opts ...Option) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{b: b, cfg: cfg}
	for _, o := range opts {
		o(&e.opts)
	}
	return e, nil
}

// Info is the backend's model description (name, vocabulary, BOS/EOS).
func (e *Engine) Info() kernels.ModelInfo { return e.b.Info() }

// Start launches the loop goroutine.
func (e *Engine) Start() {}

// Shutdown stops admission (Generate then fails with gen.ErrUnavailable), lets in-flight
// requests finish until ctx ends, fails the rest with gen.ErrAborted, and returns once
// the loop has exited.
func (e *Engine) Shutdown(ctx context.Context) error { return nil }

// Generate admits req or refuses it at once (overload, invalid, context length,
// unavailable). The channel gets token events and exactly one Done event, then closes.
// Cancelling ctx aborts the request.
func (e *Engine) Generate(ctx context.Context, req *gen.Request) (<-chan gen.Event, error) {
	return nil, fmt.Errorf("engine: not started: %w", gen.ErrUnavailable)
}

// Requests lists every in-flight request (for /debug/requests).
func (e *Engine) Requests() []gen.RequestInfo { return nil }

// Healthy returns nil, or why /health must fail.
func (e *Engine) Healthy() error { return errors.New("engine: not started") }
