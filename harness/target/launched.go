package target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"pdsoak/chaos"
	"pdsoak/chaos/netproxy"
	"pdsoak/scenarios"
	"pdsoak/supervisor"
)

// Launched is an external deployment whose processes the harness starts and
// supervises (target.launch: SGLang, vLLM or anything else on a GPU runner). Each
// process runs in its own process group, so signals and the final stop reach the
// workers it forks too. Process faults (kill, pause, restart) apply by name.
type Launched struct {
	*External
	cfg   config
	links *netproxy.Links // nil when target.links is empty

	mu     sync.Mutex
	specs  []scenarios.Launch
	procs  []*supervisor.Process // parallel to specs; nil until started
	groups map[int]string        // every process group started (restarts too) -> process name
}

// StartLaunched starts a fault proxy for every target.links entry, then every
// target.launch process in order ({link:NAME} in its command replaced by the proxy's
// address), each waiting for its health URL (within its start_timeout), then opens
// tgt.URL as an external target. Logs go to logDir/<name>.log. On failure everything
// started is stopped.
func StartLaunched(ctx context.Context, tgt scenarios.Target, logDir string, opts ...Option) (*Launched, error) {
	cfg := newConfig(opts)
	t := &Launched{cfg: cfg, specs: append([]scenarios.Launch(nil), tgt.Launch...), procs: make([]*supervisor.Process, len(tgt.Launch)), groups: map[int]string{}}
	fail := func(err error) (*Launched, error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.launchStopTimeout+teardownBound+5*time.Second)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("target: launch: %w", err), t.Stop(sctx))
	}
	if err := mkdir(logDir); err != nil {
		return nil, err
	}
	if len(tgt.Links) > 0 {
		t.links = netproxy.New()
		for _, k := range tgt.Links {
			l, err := t.links.Add(k.Name, k.Upstream)
			if err != nil {
				return fail(err)
			}
			cfg.log.Info("link proxy", "link", k.Name, "listen", l.Addr(), "upstream", k.Upstream)
		}
	}
	for i := range t.specs {
		argv, err := t.specs[i].Argv()
		if err != nil {
			return fail(fmt.Errorf("target: %s: %w", t.specs[i].Name, err))
		}
		if argv, err = t.expandLinks(argv); err != nil {
			return fail(err)
		}
		// From here Command is the whole argv as run.
		t.specs[i].Launcher, t.specs[i].Command, t.specs[i].ExtraArgs = "", argv, ""
	}
	for i, spec := range t.specs {
		env := make([]string, 0, len(spec.Env))
		for k, v := range spec.Env {
			env = append(env, k+"="+v)
		}
		sort.Strings(env)
		timeout := spec.StartTimeout.D()
		if timeout <= 0 {
			timeout = DefaultStartTimeout
		}
		p, err := supervisor.Start(spec.Name, spec.Command,
			supervisor.WithEnv(env...),
			supervisor.WithLog(filepath.Join(logDir, spec.Name+".log")),
			supervisor.WithHealthURL(spec.HealthURL),
			supervisor.WithHealthTimeout(timeout),
			supervisor.WithStopTimeout(cfg.launchStopTimeout),
			supervisor.WithLogger(cfg.log))
		if err != nil {
			return fail(err)
		}
		t.mu.Lock()
		t.procs[i] = p
		t.groups[p.PID()] = spec.Name
		t.mu.Unlock()
		cfg.log.Info("launched", "process", spec.Name, "role", spec.Role, "pid", p.PID(), "log", p.LogPath())
		if err := p.WaitHealthy(ctx); err != nil {
			return fail(err)
		}
	}
	// target.url may name a proxy too ({link:client->server}): load then goes through it.
	u, err := t.expandLinks([]string{tgt.URL})
	if err != nil {
		return fail(err)
	}
	tgt.URL = u[0]
	ext, err := OpenExternal(ctx, tgt, opts...)
	if err != nil {
		return fail(err)
	}
	var debug []Source
	for _, spec := range t.specs {
		if spec.MetricsURL != "" {
			ext.metrics = append(ext.metrics, Source{Process: spec.Name, URL: spec.MetricsURL})
		}
		// Each process's own /debug/requests (the reference server has one; SGLang and
		// vLLM do not, and the probe leaves them out), so a drop is located per process.
		if u, err := url.Parse(spec.HealthURL); err == nil && u.Host != "" && cfg.probe != nil && tgt.DebugURL == "" {
			probe := u.Scheme + "://" + u.Host + "/debug/requests"
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if err := cfg.probe(pctx, probe); err == nil {
				debug = append(debug, Source{Process: spec.Name, URL: probe})
			}
			cancel()
		}
	}
	if len(debug) > 0 {
		ext.debug = debug
	}
	t.External = ext
	return t, nil
}

// expandLinks replaces {link:NAME} and {link-port:NAME} in argv with the proxy's address.
func (t *Launched) expandLinks(argv []string) ([]string, error) {
	out := make([]string, len(argv))
	for i, a := range argv {
		v, err := scenarios.ExpandLinks(a, func(name string) (string, error) {
			if t.links == nil {
				return "", fmt.Errorf("target: {link:%s}: target.links is empty", name)
			}
			l, err := t.links.Link(name)
			if err != nil {
				return "", fmt.Errorf("target: {link:%s}: %w", name, err)
			}
			return l.Addr(), nil
		})
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// Commands returns every launched process's argv as run ({link:...} replaced).
func (t *Launched) Commands() map[string][]string {
	out := map[string][]string{}
	for _, s := range t.specs {
		out[s.Name] = append([]string(nil), s.Command...)
	}
	return out
}

func (t *Launched) find(name string) (scenarios.Launch, *supervisor.Process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.specs {
		if s.Name == name {
			if t.procs[i] == nil {
				return s, nil, fmt.Errorf("target: launched process %s was never started", name)
			}
			return s, t.procs[i], nil
		}
	}
	return scenarios.Launch{}, nil, fmt.Errorf("target: no launched process %q", name)
}

// teardownBound is how long the teardown check waits for the killed process groups'
// last members to be reaped.
const teardownBound = 10 * time.Second

// ErrLeftBehind is wrapped by Stop when a process of a launched process group is still
// there after the teardown.
var ErrLeftBehind = errors.New("target: launched processes left behind")

// Stop implements Target: every launched process ends, last started first, then the
// link proxies close. The teardown is checked: after the stop no process of any
// process group the harness started (restarts included) may remain; one that does is an
// error wrapping ErrLeftBehind, naming its pid and command.
func (t *Launched) Stop(ctx context.Context) error {
	t.mu.Lock()
	procs := append([]*supervisor.Process(nil), t.procs...)
	groups := maps.Clone(t.groups)
	t.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i] != nil {
			errs = append(errs, procs[i].Stop(ctx))
		}
	}
	if t.links != nil {
		errs = append(errs, t.links.Close())
	}
	// Its own bound, not what is left of ctx: when the stops used ctx up, the processes
	// they SIGKILLed as it ran out (and their children) are still dying, not left behind.
	if err := checkGroupsGone(context.WithoutCancel(ctx), groups, teardownBound); err != nil {
		errs = append(errs, err)
	} else if len(groups) > 0 {
		t.cfg.log.Info("teardown checked: no launched process left", "groups", len(groups))
	}
	return errors.Join(errs...)
}

// checkGroupsGone waits (up to bound) until no process of the given process groups
// exists, SIGKILLing stragglers once; it names whatever remains.
func checkGroupsGone(ctx context.Context, groups map[int]string, bound time.Duration) error {
	if len(groups) == 0 {
		return nil
	}
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	killed := false
	for {
		var alive []int
		for pgid := range groups {
			if err := syscall.Kill(-pgid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				alive = append(alive, pgid)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if !killed && time.Until(deadline) < bound/2 {
			for _, g := range alive {
				_ = syscall.Kill(-g, syscall.SIGKILL)
			}
			killed = true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			sort.Ints(alive)
			var names []string
			for _, g := range alive {
				names = append(names, fmt.Sprintf("%s (process group %d: %s)", groups[g], g, describeGroup(g)))
			}
			return fmt.Errorf("%w: %s", ErrLeftBehind, strings.Join(names, "; "))
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// describeGroup lists the pids and commands of a process group from /proc.
func describeGroup(pgid int) string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("pid %d state %s %q", pid, f[0], strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))))
	}
	if len(out) == 0 {
		return "members not readable"
	}
	return strings.Join(out, ", ")
}

// Process implements Supervisor.
func (t *Launched) Process(name string) (chaos.Process, error) {
	spec, p, err := t.find(name)
	if err != nil {
		return chaos.Process{}, err
	}
	out := chaos.Process{Name: spec.Name, Role: spec.Role, PID: p.PID()}
	if u, err := url.Parse(spec.HealthURL); err == nil && u.Host != "" {
		out.URL = u.Scheme + "://" + u.Host
	}
	return out, nil
}

// Alive is the liveness of a launched process with no health_url, which nothing else
// probes: an error when it exited (a crash the harness did not ask for, or one it did)
// or is stopped (SIGSTOP), as a health probe would fail then.
func (t *Launched) Alive(name string) error {
	_, p, err := t.find(name)
	if err != nil {
		return err
	}
	st, err := p.State()
	switch {
	case err != nil:
		return fmt.Errorf("target: %s: %w", name, err)
	case st == supervisor.StateGone || st == supervisor.StateZombie:
		if ex := p.Exit(); ex.Status != "" {
			return fmt.Errorf("target: %s (pid %d) exited: %s", name, ex.PID, ex.Status)
		}
		return fmt.Errorf("target: %s exited", name)
	case st == supervisor.StateStopped:
		return fmt.Errorf("target: %s (pid %d) is stopped", name, p.PID())
	}
	return nil
}

// Signal implements Supervisor: the signal goes to the process's whole group.
func (t *Launched) Signal(name string, sig syscall.Signal) error {
	_, p, err := t.find(name)
	if err != nil {
		return err
	}
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	return nil
}

// Restart implements Supervisor: stop the group if it still runs, start it again and
// wait for its health.
func (t *Launched) Restart(ctx context.Context, name string) error {
	_, p, err := t.find(name)
	if err != nil {
		return err
	}
	err = p.Restart(ctx)
	t.mu.Lock()
	if pid := p.PID(); pid > 0 {
		t.groups[pid] = name // the new group must be gone after the teardown too
	}
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("target: restart: %w", err)
	}
	return nil
}

// Failpoints implements Supervisor: launched servers have none.
func (t *Launched) Failpoints(process string) (chaos.Failpoints, error) {
	return nil, fmt.Errorf("target: launched process %s has no failpoint API: %w", process, chaos.ErrUnsupported)
}

// Link implements Supervisor: the proxies of target.links. Links not declared there
// (KV traffic over RDMA or NIXL among them) cannot be faulted.
func (t *Launched) Link(name string) (chaos.Link, error) {
	if t.links == nil {
		return nil, fmt.Errorf("target: link %s: the scenario declares no target.links: %w", name, chaos.ErrUnsupported)
	}
	return chaos.LinksFrom(t.links)(name)
}
