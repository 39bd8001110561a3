package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"pdsoak/chaos"
	"pdsoak/chaos/netproxy"
	"pdsoak/scenarios"
	"pdsoak/server/failpoint"
	"pdsoak/server/launcher"
)

// referenceArgs are the flags every reference worker gets from the scenario's
// reference block; reference.args come after them and win.
func referenceArgs(ref scenarios.Reference, token string) []string {
	args := []string{"--backend", ref.Backend, "--semantics", ref.Semantics}
	if ref.Profile != "" {
		args = append(args, "--sim-profile", ref.Profile)
	}
	if ref.FaultInjection {
		args = append(args, "--enable-fault-injection", "--fault-injection-token", token)
	}
	return append(args, ref.Args...)
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// pdserverCommand resolves the command that runs the reference server.
func pdserverCommand(opts Options) ([]string, error) {
	if len(opts.PDServerCommand) > 0 {
		return opts.PDServerCommand, nil
	}
	if p, err := exec.LookPath("pdserver"); err == nil {
		return []string{p}, nil
	}
	return nil, errors.New("harness: no reference server command (Options.PDServerCommand empty and no pdserver in PATH)")
}

// startEmbedded starts the reference topology of a scenario without target.url: the
// launcher's router + prefill + decode processes on free loopback ports (or a single
// colocated process when both counts are 0), logs in OutDir/logs.
var startEmbedded = func(ctx context.Context, sc *scenarios.Scenario, opts Options, log *slog.Logger) (Target, error) {
	cmd, err := pdserverCommand(opts)
	if err != nil {
		return nil, err
	}
	ref := sc.Reference
	token := newToken()
	logDir := filepath.Join(opts.OutDir, "logs")
	if ref.Prefill == 0 && ref.Decode == 0 {
		return startColocated(ctx, cmd, ref, token, logDir, log)
	}
	var links *netproxy.Links
	cfg := launcher.Config{
		Command: cmd, Prefill: ref.Prefill, Decode: ref.Decode,
		CommonArgs:  referenceArgs(ref, token),
		PrefillArgs: ref.PrefillArgs, DecodeArgs: ref.DecodeArgs, RouterArgs: ref.RouterArgs,
		LogDir: logDir, HealthTimeout: ref.StartTimeout.D(), Logger: log,
	}
	if ref.Proxies {
		links = netproxy.New()
		cfg.Links = links.Hook
	}
	topo, err := launcher.Start(ctx, cfg)
	if err != nil {
		if links != nil {
			links.Close()
		}
		return nil, err
	}
	return &embeddedTarget{topo: topo, links: links, token: token, faults: ref.FaultInjection}, nil
}

// embeddedTarget is the launcher's topology as a Target and a chaos Supervisor.
type embeddedTarget struct {
	topo   *launcher.Topology
	links  *netproxy.Links
	token  string
	faults bool
}

func (t *embeddedTarget) URL() string { return t.topo.RouterURL }
func (t *embeddedTarget) Handle() any { return t.topo }

// MetricsSources lists every worker's /metrics (the router holds no queues).
func (t *embeddedTarget) MetricsSources() []DebugSource {
	var out []DebugSource
	for _, p := range t.topo.Processes() {
		if p.Role != launcher.RoleRouter {
			out = append(out, DebugSource{Process: p.Name, URL: p.URL + "/metrics"})
		}
	}
	return out
}

// DebugSources lists /debug/requests of the router and of every worker.
func (t *embeddedTarget) DebugSources() []DebugSource {
	var out []DebugSource
	for _, p := range t.topo.Processes() {
		out = append(out, DebugSource{Process: p.Name, URL: p.URL + "/debug/requests"})
	}
	return out
}

func (t *embeddedTarget) Stop(ctx context.Context) error {
	err := t.topo.Stop(ctx)
	if t.links != nil {
		t.links.Close()
	}
	return err
}

// Process implements Supervisor.
func (t *embeddedTarget) Process(name string) (chaos.Process, error) {
	p, err := t.topo.Process(name)
	if err != nil {
		return chaos.Process{}, err
	}
	return chaos.Process{Name: p.Name, Role: p.Role, PID: p.PID, URL: p.URL}, nil
}

// Signal implements Supervisor.
func (t *embeddedTarget) Signal(name string, sig syscall.Signal) error {
	return t.topo.Signal(name, sig)
}

// Restart implements Supervisor.
func (t *embeddedTarget) Restart(ctx context.Context, name string) error {
	return t.topo.Restart(ctx, name)
}

// Failpoints implements Supervisor: the worker's token-protected admin API.
func (t *embeddedTarget) Failpoints(process string) (chaos.Failpoints, error) {
	if !t.faults {
		return nil, fmt.Errorf("harness: fault injection is off (reference.fault_injection): %w", chaos.ErrUnsupported)
	}
	p, err := t.topo.Process(process)
	if err != nil {
		return nil, err
	}
	return failpoint.NewClient(p.URL, t.token), nil
}

// Link implements Supervisor.
func (t *embeddedTarget) Link(name string) (chaos.Link, error) {
	if t.links == nil {
		return nil, fmt.Errorf("harness: no link proxies (reference.proxies): %w", chaos.ErrUnsupported)
	}
	return chaos.LinksFrom(t.links)(name)
}

// colocatedTarget is a single `pdserver colocated` process.
type colocatedTarget struct {
	url    string
	cmd    *exec.Cmd
	done   chan struct{}
	token  string
	faults bool
	once   sync.Once
	err    error
}

// ColocatedStopTimeout is how long a colocated server gets after SIGTERM.
var ColocatedStopTimeout = 10 * time.Second

func startColocated(ctx context.Context, command []string, ref scenarios.Reference, token, logDir string, log *slog.Logger) (Target, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("harness: free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logf, err := os.OpenFile(filepath.Join(logDir, "colocated.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	defer logf.Close()
	args := append(append([]string{}, command[1:]...), "colocated")
	args = append(args, referenceArgs(ref, token)...)
	args = append(args, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd := exec.Command(command[0], args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("harness: start colocated server: %w", err)
	}
	t := &colocatedTarget{url: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{}),
		token: token, faults: ref.FaultInjection}
	go func() { t.err = cmd.Wait(); close(t.done) }()
	log.Info("colocated server started", "pid", cmd.Process.Pid, "url", t.url)
	if err := waitHealth(ctx, t.url+"/health", ref.StartTimeout.D(), t.done); err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ColocatedStopTimeout+time.Second)
		defer cancel()
		_ = t.Stop(sctx)
		return nil, fmt.Errorf("harness: colocated server (log %s): %w", logf.Name(), err)
	}
	return t, nil
}

// waitHealth polls url until it answers 200, the bound passes or exited closes.
func waitHealth(ctx context.Context, url string, bound time.Duration, exited <-chan struct{}) error {
	if bound <= 0 {
		bound = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("harness: server exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("harness: %s not healthy within %v", url, bound)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (t *colocatedTarget) URL() string { return t.url }
func (t *colocatedTarget) Handle() any { return t.cmd }
func (t *colocatedTarget) MetricsSources() []DebugSource {
	return []DebugSource{{Process: "colocated", URL: t.url + "/metrics"}}
}
func (t *colocatedTarget) DebugSources() []DebugSource {
	return []DebugSource{{Process: "colocated", URL: t.url + "/debug/requests"}}
}

// Stop sends SIGTERM, then SIGKILL after ColocatedStopTimeout or when ctx ends.
func (t *colocatedTarget) Stop(ctx context.Context) error {
	t.once.Do(func() {
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(ColocatedStopTimeout)
		defer timer.Stop()
		select {
		case <-t.done:
			return
		case <-timer.C:
		case <-ctx.Done():
		}
		_ = t.cmd.Process.Kill()
		<-t.done
	})
	return nil
}

// Process implements Supervisor.
func (t *colocatedTarget) Process(name string) (chaos.Process, error) {
	if name != "colocated" {
		return chaos.Process{}, fmt.Errorf("harness: no process %q (colocated reference server)", name)
	}
	return chaos.Process{Name: "colocated", Role: "colocated", PID: t.cmd.Process.Pid, URL: t.url}, nil
}

// Signal implements Supervisor.
func (t *colocatedTarget) Signal(name string, sig syscall.Signal) error {
	if _, err := t.Process(name); err != nil {
		return err
	}
	return t.cmd.Process.Signal(sig)
}

// Restart implements Supervisor (not for a single colocated process).
func (t *colocatedTarget) Restart(context.Context, string) error {
	return fmt.Errorf("harness: restart of the colocated server: %w", chaos.ErrUnsupported)
}

// Failpoints implements Supervisor.
func (t *colocatedTarget) Failpoints(process string) (chaos.Failpoints, error) {
	if !t.faults {
		return nil, fmt.Errorf("harness: fault injection is off (reference.fault_injection): %w", chaos.ErrUnsupported)
	}
	if _, err := t.Process(process); err != nil {
		return nil, err
	}
	return failpoint.NewClient(t.url, t.token), nil
}

// Link implements Supervisor (a single process has no links).
func (t *colocatedTarget) Link(name string) (chaos.Link, error) {
	return nil, fmt.Errorf("harness: the colocated server has no links: %w", chaos.ErrUnsupported)
}
