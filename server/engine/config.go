package engine

import (
	"errors"
	"fmt"
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

// Config holds the engine's knobs. Field names follow SGLang's flags
// (MaxQueuedRequests is --max-queued-requests, and so on).
//
// Durations: 0 means "the default of the chosen Semantics", a negative value means off.
// Strict defaults: bootstrap 30s, prealloc 30s, transfer 15s, waiting 60s, running off,
// total 300s, watchdog 30s. SGLang defaults: bootstrap 300s counted from arrival, every
// other stage off, watchdog 300s and only while a batch runs; PreallocTimeout and
// TransferTimeout do not exist in SGLang and are ignored in that mode.
type Config struct {
	Role      Role
	Semantics Semantics

	// MaxQueuedRequests (--max-queued-requests) bounds the requests admitted but not
	// running. 0: no limit. Strict counts every queue of every role; SGLang semantics
	// ignore the limit in the prefill and decode roles. Strict semantics also refuse new
	// requests while queued ones wait for KV pages that are not free, and requests whose
	// KV could never fit the pool (gen.ErrContextLength).
	MaxQueuedRequests int
	// MaxRunningRequests (--max-running-requests) bounds the running batch.
	MaxRunningRequests int
	// ContextLength (--context-length): prompt + max_tokens above it is refused.
	ContextLength int
	// MemFractionStatic × DeviceMemoryGB ÷ KV bytes per token sizes the KV pool when
	// MaxTotalTokens is 0. When both MaxTotalTokens and DeviceMemoryGB are 0 the pool
	// is the whole KV store of the backend.
	MemFractionStatic float64
	DeviceMemoryGB    float64
	MaxTotalTokens    int
	// PageSize (--page-size) in tokens; 0 takes the backend's. It must match the
	// backend's KV store.
	PageSize int
	// CudaGraphMaxBS (--cuda-graph-max-bs) caps the decode batch (0: no cap). The engine
	// caps the running batch at min(MaxRunningRequests, CudaGraphMaxBS).
	CudaGraphMaxBS int
	// MaxPrefillTokens (--max-prefill-tokens) bounds the new prompt tokens admitted into
	// one step (a longer prompt still runs, alone).
	MaxPrefillTokens int
	// ChunkedPrefillSize (--chunked-prefill-size), when > 0, prefills longer prompts in
	// chunks of this many tokens across steps, so running decodes are not held up.
	ChunkedPrefillSize int
	// DisableOverlapSchedule (--disable-overlap-schedule) is accepted for compatibility;
	// the engine never overlaps scheduling with compute, so it changes nothing.
	DisableOverlapSchedule bool

	WatchdogTimeout  time.Duration // --watchdog-timeout
	BootstrapTimeout time.Duration // prefill: waiting for decode to register the room
	PreallocTimeout  time.Duration // decode: waiting for KV pages
	TransferTimeout  time.Duration // decode: receiving KV; prefill: sending it
	WaitingTimeout   time.Duration // waiting queue
	RunningTimeout   time.Duration // running batch
	RequestTimeout   time.Duration // the whole request (a request's own Deadline may be earlier)

	// RetryAfter is the hint sent with an overload refusal.
	RetryAfter time.Duration
	// ReservedDecodeTokens (SGLANG_NUM_RESERVED_DECODE_TOKENS) is the headroom the SGLang
	// decode prealloc keeps per queued request; used only in SGLang semantics.
	ReservedDecodeTokens int
	// DecodeLogInterval is how many decode steps pass between gauge refreshes of a decode
	// worker in SGLang semantics (SGLang's --decode-log-interval, 40).
	DecodeLogInterval int
}

// DefaultConfig returns a strict colocated configuration.
func DefaultConfig() Config {
	return Config{
		Role:                 RoleColocated,
		Semantics:            SemanticsStrict,
		MaxQueuedRequests:    1024,
		MaxRunningRequests:   64,
		ContextLength:        8192,
		MemFractionStatic:    0.83,
		MaxPrefillTokens:     16384,
		ChunkedPrefillSize:   8192,
		RetryAfter:           time.Second,
		ReservedDecodeTokens: 512,
		DecodeLogInterval:    40,
	}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("engine: config: "+format, args...))
	}
	switch c.Role {
	case RoleColocated, RolePrefill, RoleDecode:
	default:
		bad("role %q is unknown (colocated, prefill, decode)", c.Role)
	}
	switch c.Semantics {
	case SemanticsStrict, SemanticsSGLang:
	default:
		bad("semantics %q is unknown (strict, sglang)", c.Semantics)
	}
	if c.MaxQueuedRequests < 0 {
		bad("--max-queued-requests must be >= 0 (got %d)", c.MaxQueuedRequests)
	}
	if c.MaxRunningRequests <= 0 {
		bad("--max-running-requests must be > 0 (got %d)", c.MaxRunningRequests)
	}
	if c.ContextLength <= 1 {
		bad("--context-length must be > 1 (got %d)", c.ContextLength)
	}
	if c.MaxTotalTokens < 0 {
		bad("--max-total-tokens must be >= 0 (got %d)", c.MaxTotalTokens)
	}
	if c.DeviceMemoryGB < 0 {
		bad("--device-memory-gb must be >= 0 (got %v)", c.DeviceMemoryGB)
	}
	if c.PageSize < 0 {
		bad("--page-size must be >= 0 (got %d)", c.PageSize)
	}
	if c.CudaGraphMaxBS < 0 {
		bad("--cuda-graph-max-bs must be >= 0 (got %d)", c.CudaGraphMaxBS)
	}
	if c.MaxPrefillTokens <= 0 {
		bad("--max-prefill-tokens must be > 0 (got %d)", c.MaxPrefillTokens)
	}
	if c.ChunkedPrefillSize < 0 {
		bad("--chunked-prefill-size must be >= 0 (got %d)", c.ChunkedPrefillSize)
	}
	if c.RetryAfter < 0 {
		bad("RetryAfter must be >= 0 (got %s)", c.RetryAfter)
	}
	if c.ReservedDecodeTokens < 0 {
		bad("ReservedDecodeTokens must be >= 0 (got %d)", c.ReservedDecodeTokens)
	}
	if c.DecodeLogInterval < 0 {
		bad("DecodeLogInterval must be >= 0 (got %d)", c.DecodeLogInterval)
	}
	return errors.Join(errs...)
}

// Option configures an Engine.
type Option func(*options)

type options struct {
	reg      prometheus.Registerer
	logger   *slog.Logger
	clock    Clock
	transfer Transfer
	tick     time.Duration
}

// WithRegisterer registers the engine's metrics on reg (default: a private registry,
// reachable through Engine.Gatherer).
func WithRegisterer(reg prometheus.Registerer) Option { return func(o *options) { o.reg = reg } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock injects the clock the engine reads and waits on (tests).
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithTransfer gives a prefill or decode engine its KV transfer (required for those roles).
func WithTransfer(t Transfer) Option { return func(o *options) { o.transfer = t } }

// WithTickInterval sets how often an idle engine re-checks its timeouts (default 20ms).
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
