package router

import (
	"log/slog"
	"math/rand/v2"
	"time"
)

// Core is what a router decides with: its workers' states and seeded generator (Pool),
// the configuration its Flows share and its health checks' schedule. New builds the
// Router's from its options; NewCore builds one from the same options, with the same
// defaults, for a driver without sockets (the simulator), so that a restarted simulated
// router starts from its seed and its options as a restarted process does.
type Core struct {
	*Pool
	Flow   FlowConfig
	Health *HealthChecks
}

// NewCore builds the Core of a router over the workers ws (the np prefills first) with
// opts; the options that concern sockets (WithClient, WithKVLink) do nothing here.
func NewCore(ws []*WorkerState, np int, opts ...Option) *Core {
	return configure(opts).newCore(ws, np)
}

// configure is a Router with the defaults and then opts applied.
func configure(opts []Option) *Router {
	r := &Router{
		healthInterval: DefaultHealthInterval, healthTimeout: DefaultHealthTimeout,
		deadlineGrace: DefaultDeadlineGrace, prefillGrace: DefaultPrefillGrace, failThreshold: DefaultFailThreshold,
		maxRetries: DefaultMaxRetries, log: slog.Default(), kvLinks: map[[2]string]string{},
		abortOnUnhealthy: true, roomSalt: uint64(time.Now().UnixNano()),
		reqs: map[uint64]*flowDriver{}, done: make(chan struct{}),
		rng: rand.New(rand.NewPCG(1, 2)),
	}
	for _, o := range opts {
		o(r)
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// newCore builds the Core from r's options.
func (r *Router) newCore(ws []*WorkerState, np int) *Core {
	pool := NewPool(ws, np, r.rng)
	return &Core{Pool: pool, Health: NewHealthChecks(pool, r.healthInterval, r.healthTimeout, r.failThreshold),
		Flow: FlowConfig{MaxRetries: r.maxRetries, AbortOnUnhealthy: r.abortOnUnhealthy, DeadlineGrace: r.deadlineGrace,
			PrefillGrace: r.prefillGrace, Bugs: r.bugs, Fallback: r.fallback, RoomSalt: r.roomSalt, Log: r.log}}
}

// Routable is nil while a request can be served, else the refusal (Pool.Routable with
// the router's bugs and fallback).
func (c *Core) Routable() error { return c.Pool.Routable(c.Flow.Bugs, c.Flow.Fallback) }
