package harness

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"pdsoak/chaos"
	"pdsoak/scenarios"
)

// LaunchStopTimeout is how long a launched process group gets after SIGTERM before
// SIGKILL.
var LaunchStopTimeout = 15 * time.Second

// launchedTarget is an external deployment whose processes the harness starts and
// supervises (target.launch: SGLang, vLLM or anything else on a GPU runner). Each
// process runs in its own process group, so signals and the final stop reach the
// workers it forks too. Process faults (kill, pause, restart) apply by name.
type launchedTarget struct {
	*externalTarget
	logDir string
	log    *slog.Logger
	mu     sync.Mutex
	procs  []*launchedProc
}

type launchedProc struct {
	spec     scenarios.Launch
	cmd      *exec.Cmd
	done     chan struct{}
	restarts int
}

// startLaunched starts every target.launch process in order, each waiting for its
// health URL, then reaches target.url as for any external target.
func startLaunched(ctx context.Context, sc *scenarios.Scenario, opts Options, log *slog.Logger, hc *http.Client) (Target, error) {
	t := &launchedTarget{logDir: filepath.Join(opts.OutDir, "logs"), log: log}
	if err := os.MkdirAll(t.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	fail := func(err error) (Target, error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LaunchStopTimeout+5*time.Second)
		defer cancel()
		_ = t.Stop(sctx)
		return nil, fmt.Errorf("harness: launch: %v: %w", err, ErrInfrastructure)
	}
	for _, spec := range sc.Target.Launch {
		p := &launchedProc{spec: spec}
		t.mu.Lock()
		t.procs = append(t.procs, p)
		t.mu.Unlock()
		if err := t.start(ctx, p); err != nil {
			return fail(err)
		}
	}
	ext, err := openExternal(ctx, sc, hc)
	if err != nil {
		return fail(err)
	}
	t.externalTarget = ext
	return t, nil
}

// start runs p and waits for its health URL (if any).
func (t *launchedTarget) start(ctx context.Context, p *launchedProc) error {
	logf, err := os.OpenFile(filepath.Join(t.logDir, p.spec.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(p.spec.Command[0], p.spec.Command[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	for k, v := range p.spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.spec.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.mu.Lock()
	p.cmd, p.done = cmd, done
	t.mu.Unlock()
	t.log.Info("launched", "process", p.spec.Name, "role", p.spec.Role, "pid", cmd.Process.Pid, "log", logf.Name())
	if p.spec.HealthURL == "" {
		return nil
	}
	if err := waitHealth(ctx, p.spec.HealthURL, p.spec.StartTimeout.D(), done); err != nil {
		return fmt.Errorf("%s (log %s): %w", p.spec.Name, logf.Name(), err)
	}
	return nil
}

func (t *launchedTarget) find(name string) (*launchedProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		if p.spec.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("harness: no launched process %q", name)
}

// stopProc ends p's process group: SIGTERM, then SIGKILL after LaunchStopTimeout or
// when ctx ends.
func (t *launchedTarget) stopProc(ctx context.Context, p *launchedProc) {
	t.mu.Lock()
	cmd, done := p.cmd, p.done
	t.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT) // a paused group cannot exit
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	timer := time.NewTimer(LaunchStopTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Stop ends every launched process, last started first.
func (t *launchedTarget) Stop(ctx context.Context) error {
	t.mu.Lock()
	procs := append([]*launchedProc(nil), t.procs...)
	t.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		t.stopProc(ctx, procs[i])
	}
	return nil
}

func (t *launchedTarget) Handle() any { return t }

// Process implements Supervisor.
func (t *launchedTarget) Process(name string) (chaos.Process, error) {
	p, err := t.find(name)
	if err != nil {
		return chaos.Process{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := chaos.Process{Name: p.spec.Name, Role: p.spec.Role}
	if p.cmd != nil {
		out.PID = p.cmd.Process.Pid
	}
	if u, err := url.Parse(p.spec.HealthURL); err == nil && u.Host != "" {
		out.URL = u.Scheme + "://" + u.Host
	}
	return out, nil
}

// Signal implements Supervisor: the signal goes to the process's whole group.
func (t *launchedTarget) Signal(name string, sig syscall.Signal) error {
	p, err := t.find(name)
	if err != nil {
		return err
	}
	t.mu.Lock()
	cmd := p.cmd
	t.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("harness: %s is not running", name)
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("harness: signal %v to %s: %w", sig, name, err)
	}
	return nil
}

// Restart implements Supervisor: stop the group if it still runs, start it again and
// wait for its health.
func (t *launchedTarget) Restart(ctx context.Context, name string) error {
	p, err := t.find(name)
	if err != nil {
		return err
	}
	t.stopProc(ctx, p)
	t.mu.Lock()
	p.restarts++
	t.mu.Unlock()
	if err := t.start(ctx, p); err != nil {
		return fmt.Errorf("harness: restart: %w", err)
	}
	return nil
}

// Failpoints implements Supervisor: launched servers have none.
func (t *launchedTarget) Failpoints(process string) (chaos.Failpoints, error) {
	return nil, fmt.Errorf("harness: launched process %s has no failpoint API: %w", process, chaos.ErrUnsupported)
}

// Link implements Supervisor: launched topologies have no link proxies.
func (t *launchedTarget) Link(name string) (chaos.Link, error) {
	return nil, fmt.Errorf("harness: no link proxies for launched processes: %w", chaos.ErrUnsupported)
}
