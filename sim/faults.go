package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"pdsoak/chaos"
	"pdsoak/chaos/netproxy"
	"pdsoak/scenarios"
	"pdsoak/server/failpoint"
	"pdsoak/supervisor"
)

// Faults are chaos's own (Apply, Verify, Revert) acting on the model through the
// mechanisms of a chaos.Env (FaultEnv), as TigerBeetle runs the real replica on
// simulated IO:
//
//	Signal      SIGKILL: the process dies (connections reset, state lost);
//	            SIGSTOP/SIGCONT: nothing runs, events wait; peers' KV heartbeats time out
//	Restart     kill, then start again after RestartDelay
//	ProcState   the model's process (pids are incarnations: a restart is a new pid)
//	ProbeServer the process's HTTP server as the liveness probes find it: a dead one
//	            refuses, a paused one is silent, a running one answers
//	Failpoints  the failpoint's terms, evaluated by failpoint.Fire where the real
//	            process evaluates them (see worker.go, link_kv.go)
//	Link        toxics on the link's connections (latency ± jitter, bandwidth,
//	            reset_peer after a delay, per stream and toxicity); down: open
//	            connections reset, new ones refused (Dial says so)
//
// A toxic's and a failpoint's proof are chaos's own Verify: the simulated links count
// connections and bytes as the proxy does, the simulated failpoints evaluations and
// hits as the registry does. kv_pool_exhaustion,
// queue_saturation and client_disconnect are client-side: the harness half carries them
// out (CanModel answers nil; Fault refuses them with ErrClientSide). Refused as
// ErrNotModelled: network_toxic's timeout, slicer, limit_data and slow_close toxics,
// failpoints on the router, and failpoints other than modelledPoints.

// ErrClientSide: the fault is carried out by the harness side (client load, client
// disconnects), not by the topology.
var ErrClientSide = errors.New("sim: client-side fault: the harness applies it")

// IsClientSide reports whether f is a client-side fault type (burst load or client
// disconnects), which the harness side applies.
func IsClientSide(f scenarios.Fault) bool {
	m, err := chaos.Describe(f)
	return err == nil && (m.Kind == chaos.KindBurst || m.Kind == chaos.KindDisconnect)
}

// modelledPoints are the failpoints the simulated processes evaluate.
var modelledPoints = []string{failpoint.EngineAdmit, failpoint.EngineStep, failpoint.KVTransferSendFrame, failpoint.KVTransferBootstrap}

// FaultEnv is implemented by a topology on which the harness side runs chaos's faults
// themselves: it fills env's process and link mechanisms.
type FaultEnv interface {
	FaultEnv(env *chaos.FuncEnv)
}

// CanModel implements Server: whether the model has the mechanism f needs (its
// target's roles checked as chaos will check them), so that a run is refused up front.
func (t *topo) CanModel(f scenarios.Fault) error {
	m, err := chaos.Describe(f)
	if err != nil {
		return fmt.Errorf("sim: fault %s: %w", f.Name, err)
	}
	notModelled := func(format string, args ...any) error {
		return fmt.Errorf("%w: fault %s (%s on %s): %s", ErrNotModelled, f.Name, f.Type, f.Target, fmt.Sprintf(format, args...))
	}
	switch m.Kind {
	case chaos.KindBurst, chaos.KindDisconnect, chaos.KindPartition:
		return nil
	case chaos.KindToxic:
		if !slices.Contains([]string{netproxy.ToxicLatency, netproxy.ToxicBandwidth, netproxy.ToxicResetPeer}, m.Toxic.Type) {
			return notModelled("toxic %q (modelled: latency, bandwidth, reset_peer)", m.Toxic.Type)
		}
		return nil
	case chaos.KindFailpoint:
		if !slices.Contains(modelledPoints, m.Point) {
			return notModelled("failpoint %s is not evaluated by the simulated processes (modelled: %s)", m.Point, strings.Join(modelledPoints, ", "))
		}
	}
	// The target's processes and roles: chaos's own check, as Apply makes it.
	if err := chaos.CheckTarget(f, &chaos.FuncEnv{MembersFunc: t.sc.Topology().Members, ProcessFunc: t.process}); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if m.Kind == chaos.KindFailpoint && slices.Contains(t.sc.Topology().Members(f.Target), ProcessRouter) {
		return notModelled("the router evaluates no failpoints")
	}
	return nil
}

// Fault implements Server: chaos's fault f applied now; stop reverts it.
func (t *topo) Fault(f scenarios.Fault) (func(), error) {
	if err := t.CanModel(f); err != nil {
		return nil, err
	}
	if IsClientSide(f) {
		return nil, ErrClientSide
	}
	fault, err := chaos.New(f)
	if err != nil {
		return nil, err
	}
	env := &chaos.FuncEnv{MembersFunc: t.sc.Topology().Members}
	t.FaultEnv(env)
	if err := fault.Apply(context.Background(), env); err != nil {
		return nil, err
	}
	done := false
	return func() {
		if !done {
			done = true
			_ = fault.Revert(context.Background(), env)
		}
	}, nil
}

// FaultEnv implements FaultEnv.
func (t *topo) FaultEnv(env *chaos.FuncEnv) {
	env.ProcessFunc = t.process
	env.ProcStateFunc = t.procState
	env.ProbeServerFunc = t.probeServer
	env.SignalFunc = t.signal
	env.RestartFunc = func(_ context.Context, name string) error {
		if _, err := t.process(name); err != nil {
			return err
		}
		t.kill(name)
		t.start(name)
		return nil
	}
	env.FailpointsFunc = func(name string) (chaos.Failpoints, error) {
		w := t.worker(name)
		if w == nil {
			return nil, fmt.Errorf("sim: %s evaluates no failpoints: %w", name, chaos.ErrUnsupported)
		}
		return &simFailpoints{w: w, inc: w.inc}, nil
	}
	env.LinkFunc = func(name string) (chaos.Link, error) {
		l, ok := t.links[name]
		if !ok {
			return nil, fmt.Errorf("sim: no link %q: %w", name, chaos.ErrUnsupported)
		}
		return simLink{l}, nil
	}
}

// A process's pid is its place in process order and its incarnation: a restart is a
// new pid, a dead one has none.
const pidStride = 1 << 16

func (t *topo) process(name string) (chaos.Process, error) {
	for i, p := range t.sc.Topology().Processes {
		if p.Name != name {
			continue
		}
		alive, inc := false, 0
		if name == ProcessRouter && t.router != nil {
			alive, inc = t.router.alive, t.router.inc
		} else if w := t.worker(name); w != nil {
			alive, inc = w.alive, w.inc
		}
		pid := 0
		if alive {
			pid = (i+1)*pidStride + inc
		}
		return chaos.Process{Name: name, Role: p.Role, PID: pid, URL: "sim://" + name}, nil
	}
	return chaos.Process{}, fmt.Errorf("sim: process %q is unknown", name)
}

func (t *topo) procState(pid int) (supervisor.State, error) {
	procs := t.sc.Topology().Processes
	if i := pid/pidStride - 1; i >= 0 && i < len(procs) {
		if p, _ := t.process(procs[i].Name); p.PID == pid && pid > 0 {
			if _, paused := t.HealthState(p.Name); paused {
				return supervisor.StateStopped, nil
			}
			return supervisor.StateRunning, nil
		}
	}
	return supervisor.StateGone, fmt.Errorf("%w: pid %d", chaos.ErrNoProcess, pid)
}

// probeServer is the model's answer to a probe of a process's HTTP server, as the
// liveness probes get it: a dead process (or a router still in its first round of
// checks) refuses, a paused one sends nothing, a running one answers.
func (t *topo) probeServer(_ context.Context, p chaos.Process, _ time.Duration) error {
	alive, paused := t.HealthState(p.Name)
	switch {
	case !alive:
		return fmt.Errorf("sim: %s is down: %w", p.Name, chaos.ErrRefused)
	case paused:
		return fmt.Errorf("sim: %s is paused: %w", p.Name, chaos.ErrNoResponse)
	}
	if _, err := t.HealthAnswer(p.Name); err != nil {
		return fmt.Errorf("sim: %s: %w: %w", p.Name, chaos.ErrRefused, err)
	}
	return nil
}

func (t *topo) signal(name string, sig syscall.Signal) error {
	switch sig {
	case syscall.SIGKILL:
		t.kill(name)
	case syscall.SIGSTOP:
		t.pause(name, true)
	case syscall.SIGCONT:
		t.pause(name, false)
	default:
		return fmt.Errorf("sim: signal %v: %w", sig, chaos.ErrUnsupported)
	}
	return nil
}

func (t *topo) kill(name string) {
	if name == ProcessRouter {
		t.router.crash()
		return
	}
	t.worker(name).crash()
}

// start brings a killed process back after RestartDelay.
func (t *topo) start(name string) {
	t.loop.After(RestartDelay, func() {
		if name == ProcessRouter {
			if !t.router.alive {
				t.router.restart()
			}
			return
		}
		if w := t.worker(name); !w.alive {
			_ = w.boot() // the configuration booted once already
		}
	})
}

func (t *topo) pause(name string, on bool) {
	if name != ProcessRouter {
		if on {
			t.worker(name).pause()
		} else {
			t.worker(name).resume()
		}
		return
	}
	if on {
		t.router.stop()
	} else if t.router.cont() {
		t.router.flush()
	}
}

// simFailpoints is chaos.Failpoints on one incarnation of a worker: its failpoints go
// with it when it dies.
type simFailpoints struct {
	w   *worker
	inc int
}

func (f *simFailpoints) Enable(_ context.Context, name, terms string) (failpoint.Status, error) {
	w := f.w
	if !w.alive || w.inc != f.inc {
		return failpoint.Status{}, fmt.Errorf("sim: %s: %w", w.name, ErrConnRefused)
	}
	chain, err := failpoint.ParseTerms(terms)
	if err != nil {
		return failpoint.Status{}, err
	}
	if w.fps == nil {
		w.fps = map[string]*fpState{}
	}
	fp := w.fps[name]
	if fp == nil {
		fp = &fpState{}
		w.fps[name] = fp
	}
	// As the registry's Enable: the counts restart, the callers held by the old terms
	// are let go.
	fp.State.Enable(terms, chain)
	fp.letGo()
	w.wake()
	return fp.Describe(name), nil
}

func (f *simFailpoints) Disable(_ context.Context, name string) error {
	if f.w.inc != f.inc {
		return nil // the process restarted: its failpoints went with it
	}
	if fp := f.w.fps[name]; fp != nil {
		fp.State.Disable() // its counts stay readable until the next Enable, as the registry's
		fp.letGo()
	}
	return nil
}

// letGo ends every hold of the failpoint's terms.
func (fp *fpState) letGo() {
	held := fp.waiters
	fp.waiters = nil
	for _, fn := range held {
		fn()
	}
}

// Get is the failpoint's status, counted as the registry counts (failpoint.State): its
// counts prove the fault (chaos's Verify).
func (f *simFailpoints) Get(_ context.Context, name string) (failpoint.Status, error) {
	if fp := f.w.fps[name]; f.w.inc == f.inc && fp != nil {
		return fp.Describe(name), nil
	}
	return failpoint.Status{Name: name}, nil
}

// simLink is chaos.Link (and chaos.Dialer) on a simulated link.
type simLink struct{ l *link }

func (k simLink) Name() string                     { return k.l.name }
func (k simLink) Addr() string                     { return "sim://" + k.l.name }
func (k simLink) IsUp() bool                       { return k.l.cut == 0 }
func (k simLink) Counters() netproxy.Counters      { return k.l.counted }
func (k simLink) Up() error                        { k.l.cut = max(k.l.cut-1, 0); return nil }
func (k simLink) Down() error                      { k.l.cut++; k.l.breakAll(ErrConnReset); return nil }
func (k simLink) AddToxic(tx netproxy.Toxic) error { return k.add(tx) }

// Dial implements chaos.Dialer: a link that is down refuses.
func (k simLink) Dial(context.Context) error {
	if !k.IsUp() {
		return ErrConnRefused
	}
	return nil
}

func (k simLink) Toxics() []string {
	var out []string
	for _, tx := range k.l.toxics {
		out = append(out, tx.name)
	}
	return out
}

func (k simLink) RemoveToxic(_ context.Context, name string) error {
	k.l.toxics = slices.DeleteFunc(k.l.toxics, func(tx *linkToxic) bool { return tx.name == name })
	return nil
}

// add puts a toxic on the link and on its open connections (each drawn by toxicity).
func (k simLink) add(t netproxy.Toxic) error {
	tx := &linkToxic{name: t.Name, typ: t.Type, toxicity: float64(t.Toxicity)}
	if t.Stream == netproxy.Upstream {
		tx.streams[up] = true
	} else {
		tx.streams[down] = true
	}
	num := func(k string) float64 {
		switch v := t.Attributes[k].(type) {
		case int64:
			return float64(v)
		case int:
			return float64(v)
		}
		return 0
	}
	ms := func(k string) time.Duration { return time.Duration(num(k)) * time.Millisecond }
	tx.latency, tx.jitter, tx.after, tx.rate = ms("latency"), ms("jitter"), ms("timeout"), num("rate")*1024
	k.l.toxics = append(k.l.toxics, tx)
	for _, c := range slices.Clone(k.l.conns) {
		c.adopt(tx)
	}
	return nil
}
