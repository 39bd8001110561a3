package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"pdsoak/kernels"
	"pdsoak/server/engine"
	"pdsoak/server/router"
	"pdsoak/server/scheduler"
)

// WorkerSpec is what a worker's command line decides, resolved without starting
// anything: the simulator (sim) builds its workers from it, so a simulated worker reads
// its flags exactly as `pdserver prefill|decode|colocated` does.
type WorkerSpec struct {
	Role engine.Role
	// Engine is the engine configuration (the scheduler's Limits among it), validated.
	Engine engine.Config
	// Kernels is the backend configuration with NumPages sized from the flags.
	Kernels kernels.Config
	// Pages is the KV pool in pages (engine.PoolPages, or the backend's default store).
	Pages int
	// SeedSet reports whether --seed was given (Kernels.Seed is then its value).
	SeedSet bool

	// The KV transfer's bounds (kvtransfer options the flags and the semantics imply).
	// ProgressTimeout bounds the gap between two frames of a room on decode (0: none);
	// WaitingTimeout the wait for a room's first frame (0: left to the engine).
	ProgressTimeout, WaitingTimeout time.Duration
	HeartbeatInterval, IdleTimeout  time.Duration
	// StaleEndpoints: decode keeps a dead connection to a prefill cached
	// (scheduler.BugStaleBootstrapEndpoint).
	StaleEndpoints bool
}

// WorkerConfig parses a worker's arguments (the flags after `pdserver ROLE`) with the
// same flag set and validation the worker command uses, and resolves them as
// buildWorker and newTransfer do. Errors name the flag. --enable-fault-injection is
// accepted and ignored (the caller has no admin API to serve).
func WorkerConfig(role engine.Role, args []string) (WorkerSpec, error) {
	if err := role.Validate(); err != nil {
		return WorkerSpec{}, fmt.Errorf("cli: %w", err)
	}
	f := defaultWorkerFlags()
	fs := pflag.NewFlagSet(string(role), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs, role == rolePrefill)
	if err := fs.Parse(args); err != nil {
		return WorkerSpec{}, fmt.Errorf("cli: %s args: %w", role, err)
	}
	if fs.NArg() > 0 {
		return WorkerSpec{}, fmt.Errorf("cli: %s args: unexpected argument %q", role, fs.Arg(0))
	}
	f.enableFaultInjection, f.faultTokenFile = false, ""
	if err := f.validate(); err != nil {
		return WorkerSpec{}, fmt.Errorf("cli: %s args: %w", role, err)
	}
	kc := f.kernelsConfig()
	info, err := kernels.Describe(kc)
	if err != nil {
		return WorkerSpec{}, fmt.Errorf("cli: %s args: %w", role, err)
	}
	pages, err := poolPages(f, info)
	if err != nil {
		return WorkerSpec{}, fmt.Errorf("cli: %s args: %w", role, err)
	}
	kc.NumPages = pages
	b := f.kvBounds(role)
	sp := WorkerSpec{Role: role, Engine: f.engineConfig(role), Kernels: kc, Pages: pages, SeedSet: fs.Changed("seed"),
		ProgressTimeout: b.progress, WaitingTimeout: b.waiting, HeartbeatInterval: b.interval, IdleTimeout: b.idle,
		StaleEndpoints: b.stale}
	if sp.Engine.PageSize == 0 {
		sp.Engine.PageSize = kc.PageSize
	}
	return sp, nil
}

// RouterSpec is what the router's command line decides (the options runRouter passes
// to router.New and the API), resolved without starting anything.
type RouterSpec struct {
	Semantics                     scheduler.Semantics
	Bugs                          scheduler.BugSet
	MaxRetries                    int
	HealthInterval, HealthTimeout time.Duration
	AbortOnUnhealthy              bool
	Seed                          uint64
	// RequestTimeout is set on requests that carry no deadline (0: none).
	RequestTimeout time.Duration
	// ContextLength is --context-length (0: the first decode worker's).
	ContextLength int
	// PDFallback is --pd-fallback (router.FallbackNone unless decode-only).
	PDFallback router.Fallback
	// Options are the router.Options runRouter passes to router.New (router.NewCore
	// takes them too), for the placeholder workers (--kv-link's URLs are theirs).
	Options []router.Option
}

// RouterConfig parses the router's arguments (reference.router_args and the
// semantics) with the router command's flag set and validation. The worker URLs are
// the caller's: --prefill and --decode need not be given.
func RouterConfig(args []string) (RouterSpec, error) {
	f := defaultRouterFlags()
	fs := pflag.NewFlagSet("router", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return RouterSpec{}, fmt.Errorf("cli: router args: %w", err)
	}
	if fs.NArg() > 0 {
		return RouterSpec{}, fmt.Errorf("cli: router args: unexpected argument %q", fs.Arg(0))
	}
	if len(f.prefill) == 0 {
		f.prefill = []string{"http://prefill.invalid"}
	}
	if len(f.decode) == 0 {
		f.decode = []string{"http://decode.invalid"}
	}
	_, _, opts, err := f.workers()
	if err != nil {
		return RouterSpec{}, fmt.Errorf("cli: router args: %w", err)
	}
	sem := scheduler.Semantics(f.semantics)
	if sem == "" {
		sem = scheduler.SemanticsStrict
	}
	if f.requestTimeout < 0 {
		return RouterSpec{}, errors.New("cli: router args: --request-timeout must be >= 0")
	}
	return RouterSpec{Semantics: sem, Bugs: append(scheduler.BugSet(nil), f.bugs...), MaxRetries: f.maxRetries,
		HealthInterval: time.Duration(f.healthInterval), HealthTimeout: time.Duration(f.healthTimeout),
		AbortOnUnhealthy: f.abortUnhealthy, Seed: f.seed, RequestTimeout: time.Duration(f.requestTimeout),
		ContextLength: f.contextLength, PDFallback: pdFallback(f.pdFallback), Options: opts}, nil
}

// pdFallback is the parsed --pd-fallback (workers() has already refused a bad one).
func pdFallback(s string) router.Fallback {
	fb, _ := router.ParseFallback(s)
	return fb
}
