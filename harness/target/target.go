package target

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"pdsoak/chaos"
)

// Target is a reachable endpoint under test and what the runner may ask of it.
type Target interface {
	// URL is the base URL requests go to.
	URL() string
	// MetricsSources lists Prometheus endpoints scraped for samples and the leak check.
	MetricsSources() []Source
	// DebugSources lists /debug/requests endpoints consulted on silent drops.
	DebugSources() []Source
	// Stop stops whatever the harness started (nothing for an external target).
	Stop(ctx context.Context) error
}

// Source is one server process's HTTP endpoint (/metrics or /debug/requests).
type Source struct {
	Process string // router, prefill-0, decode-0, colocated, target
	URL     string
}

// Supervisor is implemented by targets whose processes the harness controls: it gives
// faults signals, restarts, failpoints and link proxies. Targets without it support
// only load, client and metrics faults.
type Supervisor interface {
	Process(name string) (chaos.Process, error)
	Signal(name string, sig syscall.Signal) error
	Restart(ctx context.Context, name string) error
	Failpoints(process string) (chaos.Failpoints, error)
	Link(name string) (chaos.Link, error)
}

var (
	_ Supervisor = (*Embedded)(nil)
	_ Supervisor = (*Colocated)(nil)
	_ Supervisor = (*Launched)(nil)
	_ Target     = (*External)(nil)
)

// Defaults of the options.
const (
	// DefaultReachTimeout bounds the reachability check of an external target.
	DefaultReachTimeout = 10 * time.Second
	// DefaultLaunchStopTimeout is how long a target.launch process group gets after
	// SIGTERM before SIGKILL (inference servers take a while to free GPU memory).
	DefaultLaunchStopTimeout = 15 * time.Second
	// DefaultStopTimeout is the same bound for the embedded reference server.
	DefaultStopTimeout = 10 * time.Second
	// DefaultStartTimeout bounds a health wait whose scenario sets none.
	DefaultStartTimeout = time.Minute
)

// Option configures the constructors.
type Option func(*config)

type config struct {
	log               *slog.Logger
	reachTimeout      time.Duration
	launchStopTimeout time.Duration
	stopTimeout       time.Duration
	probe             func(ctx context.Context, url string) error
}

func newConfig(opts []Option) config {
	c := config{reachTimeout: DefaultReachTimeout, launchStopTimeout: DefaultLaunchStopTimeout, stopTimeout: DefaultStopTimeout}
	for _, o := range opts {
		o(&c)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// WithLogger receives the targets' own messages (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithReachTimeout bounds the reachability check of an external target.
func WithReachTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.reachTimeout = d
		}
	}
}

// WithStopTimeout sets the SIGTERM→SIGKILL bound of launched processes (launch) and of
// the embedded reference server (embedded).
func WithStopTimeout(launch, embedded time.Duration) Option {
	return func(c *config) {
		if launch > 0 {
			c.launchStopTimeout = launch
		}
		if embedded > 0 {
			c.stopTimeout = embedded
		}
	}
}

// WithDebugProbe checks a candidate /debug/requests URL of an external target that
// names none; a URL it accepts becomes the target's debug source (default: none is
// probed).
func WithDebugProbe(probe func(ctx context.Context, url string) error) Option {
	return func(c *config) { c.probe = probe }
}

func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	return nil
}
