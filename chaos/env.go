package chaos

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"pdsoak/chaos/netproxy"
	"pdsoak/ledger"
	"pdsoak/server/failpoint"
	"pdsoak/supervisor"
)

// Env is what faults act on. The harness implements it over the launcher topology (or
// over target.launch processes); tests use hand-written fakes. Every method may return
// an error wrapping ErrUnsupported when the environment lacks the mechanism.
type Env interface {
	// Members expands a fault target into concrete names: a process or role name into
	// process names, a link or role link ("router->decode") into link names, a workload
	// name or "client" into itself. Nil when it names nothing.
	Members(target string) []string
	// Process describes a supervised process by concrete name.
	Process(name string) (Process, error)
	// Signal sends sig to the named process.
	Signal(name string, sig syscall.Signal) error
	// Restart starts the named process again (after a kill, or killing it first if it
	// runs) and returns once it is healthy or ctx ends.
	Restart(ctx context.Context, name string) error
	// Failpoints returns the failpoint admin API of the named process.
	Failpoints(process string) (Failpoints, error)
	// Link returns the fault proxy of the named link.
	Link(name string) (Link, error)
	// Load starts a burst of requests through the target's front end. The burst runs
	// until it completes or Stop is called on the returned Run.
	Load(ctx context.Context, target string, b Burst) (Run, error)
	// Disconnect makes the client side cancel streaming requests of target (a workload
	// or "client") after some tokens, until Stop is called.
	Disconnect(ctx context.Context, target string, d Disconnect) (Run, error)
	// Scrape returns the numeric samples of a process's Prometheus /metrics (name with
	// labels dropped → value, summed over label sets).
	Scrape(ctx context.Context, process string) (map[string]float64, error)
	// Emit records an event in the ledger.
	Emit(ev ledger.Event)
}

// Process is one supervised process.
type Process struct {
	Name string
	Role string // router, prefill, decode, colocated
	PID  int
	// URL is the base URL of its HTTP server; empty when unknown. The kill and pause
	// proofs probe it (ServerProber): the server may run outside the signalled pid's
	// process group (a container, a setsid launcher).
	URL string
}

// Failpoints is a process's failpoint admin API; *failpoint.Client implements it.
type Failpoints interface {
	Enable(ctx context.Context, name, terms string) (failpoint.Status, error)
	Disable(ctx context.Context, name string) error
	Get(ctx context.Context, name string) (failpoint.Status, error)
}

// Link is a proxied link; *netproxy.Link implements it.
type Link interface {
	Name() string
	Addr() string
	AddToxic(t netproxy.Toxic) error
	RemoveToxic(ctx context.Context, name string) error
	Toxics() []string
	Down() error
	Up() error
	IsUp() bool
	Counters() netproxy.Counters
}

var (
	_ Failpoints = (*failpoint.Client)(nil)
	_ Link       = (*netproxy.Link)(nil)
)

// Burst is a load burst.
type Burst struct {
	// Requests is how many requests to send; Concurrency how many may be in flight at
	// once (0: all of them).
	Requests    int
	Concurrency int
	// PromptTokens is the approximate prompt length; MaxTokens the completion length.
	PromptTokens int
	MaxTokens    int
}

// Disconnect describes client-side cancels.
type Disconnect struct {
	// AfterTokens is how many completion tokens a stream receives before it is cancelled.
	AfterTokens int
	// Fraction of eligible streams to cancel (0..1).
	Fraction float64
	// Requests, when > 0, makes the Env send that many extra streaming requests of its
	// own to cancel; 0 cancels the workload's own requests.
	Requests int
}

// Run is a running load burst or disconnect campaign.
type Run interface {
	Stats() RunStats
	// Stop ends the run: outstanding requests are cancelled, and Stop returns once they
	// have finished.
	Stop()
}

// RunStats counts what a Run did so far.
type RunStats struct {
	Sent, Done, OK, Rejected, Errors, Cancelled int64
	// FirstTokens counts the requests that received their first content token.
	FirstTokens int64
	// QueuedBehind is the most requests seen still waiting for their first token, sent
	// before a stream of the same run that ended ok after more than one chunk: requests the
	// server held back while it served another to its end (0: never seen).
	QueuedBehind int64
}

// FuncEnv implements Env with optional function fields; a nil field makes its method
// return ErrUnsupported (Members falls back to the target itself, Emit drops events).
// The harness fills it from the launcher topology:
//
//	env := &chaos.FuncEnv{
//		MembersFunc: sc.Topology().Members,
//		ProcessFunc: ..., SignalFunc: topo.Signal, RestartFunc: ...,
//		FailpointsFunc: func(p string) (chaos.Failpoints, error) {
//			return failpoint.NewClient(url(p), token), nil },
//		LinkFunc: chaos.LinksFrom(links), EmitFunc: ledger.Emit,
//	}
type FuncEnv struct {
	MembersFunc    func(target string) []string
	ProcessFunc    func(name string) (Process, error)
	SignalFunc     func(name string, sig syscall.Signal) error
	RestartFunc    func(ctx context.Context, name string) error
	FailpointsFunc func(process string) (Failpoints, error)
	LinkFunc       func(name string) (Link, error)
	LoadFunc       func(ctx context.Context, target string, b Burst) (Run, error)
	DisconnectFunc func(ctx context.Context, target string, d Disconnect) (Run, error)
	ScrapeFunc     func(ctx context.Context, process string) (map[string]float64, error)
	EmitFunc       func(ev ledger.Event)
	// ProcStateFunc reads a process's state (ProcStater); nil: /proc.
	ProcStateFunc func(pid int) (supervisor.State, error)
	// ProbeServerFunc probes a process's HTTP server (ServerProber); nil: the network
	// (ProbeServer).
	ProbeServerFunc func(ctx context.Context, p Process, timeout time.Duration) error
}

var _ Env = (*FuncEnv)(nil)

func unsupported(what string) error { return fmt.Errorf("%w: %s", ErrUnsupported, what) }

// Members implements Env.
func (e *FuncEnv) Members(target string) []string {
	if e.MembersFunc == nil {
		if target == "" {
			return nil
		}
		return []string{target}
	}
	return e.MembersFunc(target)
}

// Process implements Env.
func (e *FuncEnv) Process(name string) (Process, error) {
	if e.ProcessFunc == nil {
		return Process{}, unsupported("process lookup")
	}
	return e.ProcessFunc(name)
}

// Signal implements Env.
func (e *FuncEnv) Signal(name string, sig syscall.Signal) error {
	if e.SignalFunc == nil {
		return unsupported("signals")
	}
	return e.SignalFunc(name, sig)
}

// Restart implements Env.
func (e *FuncEnv) Restart(ctx context.Context, name string) error {
	if e.RestartFunc == nil {
		return unsupported("restart")
	}
	return e.RestartFunc(ctx, name)
}

// Failpoints implements Env.
func (e *FuncEnv) Failpoints(process string) (Failpoints, error) {
	if e.FailpointsFunc == nil {
		return nil, unsupported("failpoints")
	}
	return e.FailpointsFunc(process)
}

// Link implements Env.
func (e *FuncEnv) Link(name string) (Link, error) {
	if e.LinkFunc == nil {
		return nil, unsupported("link proxies")
	}
	return e.LinkFunc(name)
}

// Load implements Env.
func (e *FuncEnv) Load(ctx context.Context, target string, b Burst) (Run, error) {
	if e.LoadFunc == nil {
		return nil, unsupported("load bursts")
	}
	return e.LoadFunc(ctx, target, b)
}

// Disconnect implements Env.
func (e *FuncEnv) Disconnect(ctx context.Context, target string, d Disconnect) (Run, error) {
	if e.DisconnectFunc == nil {
		return nil, unsupported("client disconnects")
	}
	return e.DisconnectFunc(ctx, target, d)
}

// Scrape implements Env.
func (e *FuncEnv) Scrape(ctx context.Context, process string) (map[string]float64, error) {
	if e.ScrapeFunc == nil {
		return nil, unsupported("metrics scrape")
	}
	return e.ScrapeFunc(ctx, process)
}

// Emit implements Env.
func (e *FuncEnv) Emit(ev ledger.Event) {
	if e.EmitFunc != nil {
		e.EmitFunc(ev)
	}
}

// LinksFrom adapts a netproxy.Links to FuncEnv.LinkFunc.
func LinksFrom(l *netproxy.Links) func(name string) (Link, error) {
	return func(name string) (Link, error) {
		k, err := l.Link(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		return k, nil
	}
}

// ProcState implements ProcStater.
func (e *FuncEnv) ProcState(pid int) (supervisor.State, error) {
	if e.ProcStateFunc == nil {
		return ProcState(pid)
	}
	return e.ProcStateFunc(pid)
}

// ProbeServer implements ServerProber.
func (e *FuncEnv) ProbeServer(ctx context.Context, p Process, timeout time.Duration) error {
	if e.ProbeServerFunc == nil {
		return ProbeServer(ctx, p, timeout)
	}
	return e.ProbeServerFunc(ctx, p, timeout)
}
