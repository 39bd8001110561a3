package target

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"pdsoak/chaos"
	"pdsoak/scenarios"
	"pdsoak/supervisor"
)

// Launched is an external deployment whose processes the harness starts and
// supervises (target.launch: SGLang, vLLM or anything else on a GPU runner). Each
// process runs in its own process group, so signals and the final stop reach the
// workers it forks too. Process faults (kill, pause, restart) apply by name.
type Launched struct {
	*External
	cfg config

	mu    sync.Mutex
	specs []scenarios.Launch
	procs []*supervisor.Process // parallel to specs; nil until started
}

// StartLaunched starts every target.launch process in order, each waiting for its
// health URL (within its start_timeout), then opens tgt.URL as an external target. Logs
// go to logDir/<name>.log. On failure everything started is stopped.
func StartLaunched(ctx context.Context, tgt scenarios.Target, logDir string, opts ...Option) (*Launched, error) {
	cfg := newConfig(opts)
	t := &Launched{cfg: cfg, specs: tgt.Launch, procs: make([]*supervisor.Process, len(tgt.Launch))}
	fail := func(err error) (*Launched, error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.launchStopTimeout+5*time.Second)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("target: launch: %w", err), t.Stop(sctx))
	}
	if err := mkdir(logDir); err != nil {
		return nil, err
	}
	for i, spec := range tgt.Launch {
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
		t.mu.Unlock()
		cfg.log.Info("launched", "process", spec.Name, "role", spec.Role, "pid", p.PID(), "log", p.LogPath())
		if err := p.WaitHealthy(ctx); err != nil {
			return fail(err)
		}
	}
	ext, err := OpenExternal(ctx, tgt, opts...)
	if err != nil {
		return fail(err)
	}
	t.External = ext
	return t, nil
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

// Stop implements Target: every launched process ends, last started first.
func (t *Launched) Stop(ctx context.Context) error {
	t.mu.Lock()
	procs := append([]*supervisor.Process(nil), t.procs...)
	t.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i] != nil {
			errs = append(errs, procs[i].Stop(ctx))
		}
	}
	return errors.Join(errs...)
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
	if err := p.Restart(ctx); err != nil {
		return fmt.Errorf("target: restart: %w", err)
	}
	return nil
}

// Failpoints implements Supervisor: launched servers have none.
func (t *Launched) Failpoints(process string) (chaos.Failpoints, error) {
	return nil, fmt.Errorf("target: launched process %s has no failpoint API: %w", process, chaos.ErrUnsupported)
}

// Link implements Supervisor: launched topologies have no link proxies.
func (t *Launched) Link(string) (chaos.Link, error) {
	return nil, fmt.Errorf("target: no link proxies for launched processes: %w", chaos.ErrUnsupported)
}
