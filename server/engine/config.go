package engine

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pdsoak/server/scheduler"
)

// Role is what a worker process does: colocated (both phases), prefill or decode.
type Role = scheduler.Role

// Semantics selects strict invariants or SGLang's documented PD behaviour.
type Semantics = scheduler.Semantics

// Roles and semantics, re-exported from the scheduler.
const (
	RoleColocated   = scheduler.RoleColocated
	RolePrefill     = scheduler.RolePrefill
	RoleDecode      = scheduler.RoleDecode
	SemanticsStrict = scheduler.SemanticsStrict
	SemanticsSGLang = scheduler.SemanticsSGLang
)

// Limits are the worker's SGLang-named bounds (see scheduler.Limits).
type Limits = scheduler.Limits

// Config holds the engine's knobs: the worker's Limits, validated once by
// scheduler.Limits.Validate, and what only the engine uses.
type Config struct {
	Role Role
	Limits

	// DisableOverlapSchedule (--disable-overlap-schedule) is accepted for compatibility;
	// the engine never overlaps scheduling with compute, so it changes nothing.
	DisableOverlapSchedule bool
}

// DefaultConfig returns a strict colocated configuration.
func DefaultConfig() Config {
	return Config{Role: RoleColocated, Limits: scheduler.DefaultLimits()}
}

// Validate reports every problem at once (the role's and the limits').
func (c Config) Validate() error {
	return errors.Join(c.Role.Validate(), c.Limits.Validate())
}

// Option configures an Engine.
type Option func(*options)

type options struct {
	reg       prometheus.Registerer
	logger    *slog.Logger
	clock     Clock
	transfer  Transfer
	tick      time.Duration
	warnEvery time.Duration
}

// Defaults of the options.
const (
	DefaultTickInterval = 20 * time.Millisecond
	DefaultWarnEvery    = time.Second
)

// WithRegisterer registers the engine's metrics on reg (default: a private registry,
// reachable through Engine.Gatherer).
func WithRegisterer(reg prometheus.Registerer) Option { return func(o *options) { o.reg = reg } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock injects the clock the engine reads and waits on (tests).
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithTransfer gives a prefill or decode engine its KV transfer (required for those roles).
func WithTransfer(t Transfer) Option { return func(o *options) { o.transfer = t } }

// WithWarnEvery bounds warnings that repeat under load (KV retractions) to one per d on
// the engine's clock; each says how many events it stands for (default DefaultWarnEvery).
func WithWarnEvery(d time.Duration) Option { return func(o *options) { o.warnEvery = d } }

// WithTickInterval sets how often an idle engine re-checks its timeouts (default
// DefaultTickInterval).
func WithTickInterval(d time.Duration) Option { return func(o *options) { o.tick = d } }

// Clock is the time source of the engine loop.
type Clock interface {
	Now() time.Time
	// After is time.After on this clock.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
