package target

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"syscall"

	"pdsoak/chaos"
	"pdsoak/chaos/netproxy"
	"pdsoak/internal/freeport"
	"pdsoak/scenarios"
	"pdsoak/server/failpoint"
	"pdsoak/server/launcher"
	"pdsoak/server/netns"
	"pdsoak/supervisor"
)

// ColocatedName is the process name of the colocated reference server.
const ColocatedName = "colocated"

// ReferenceArgs are the flags every reference worker gets from the scenario's
// reference block; reference.args come after them and win. The fault-injection token
// is not among them: it travels in the environment.
func ReferenceArgs(ref scenarios.Reference) []string {
	args := []string{"--backend", ref.Backend, "--semantics", ref.Semantics}
	if ref.Profile != "" {
		args = append(args, "--sim-profile", ref.Profile)
	}
	if ref.FaultInjection {
		args = append(args, "--enable-fault-injection")
	}
	return append(args, ref.Args...)
}

// RouterArgs are the router's flags: the scenario's semantics, so that a --semantics
// override never leaves the router strict under sglang workers, the failpoint admin API
// when the workers have it (so a fault can make the router's /health lie: api/health),
// then reference.router_args, which come after them and win.
func RouterArgs(ref scenarios.Reference) []string {
	args := []string{"--semantics", ref.Semantics}
	if ref.FaultInjection {
		args = append(args, "--enable-fault-injection")
	}
	return append(args, ref.RouterArgs...)
}

func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("target: fault-injection token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// StartEmbedded starts the reference server of a scenario without target.url: the
// launcher's router + prefill + decode processes on free loopback ports (an *Embedded),
// or a single colocated process when both counts are 0 (a *Colocated). command is argv
// that runs pdserver's root command; logs go to logDir.
func StartEmbedded(ctx context.Context, ref scenarios.Reference, command []string, logDir string, opts ...Option) (Target, error) {
	if len(command) == 0 {
		return nil, errors.New("target: no reference server command")
	}
	cfg := newConfig(opts)
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	if !ref.FaultInjection {
		token = ""
	}
	if ref.Prefill == 0 && ref.Decode == 0 {
		return startColocated(ctx, cfg, command, ref, token, logDir)
	}
	var links *netproxy.Links
	var nsNet *netns.Net
	proxyHost := "127.0.0.1"
	if ref.Netns {
		if nsNet, err = startNetns(ctx, ref); err != nil {
			return nil, err
		}
		proxyHost = nsNet.Gateway
	}
	lcfg := launcher.Config{
		Command: command, Prefill: ref.Prefill, Decode: ref.Decode,
		CommonArgs:  ReferenceArgs(ref),
		PrefillArgs: ref.PrefillArgs, DecodeArgs: ref.DecodeArgs, RouterArgs: RouterArgs(ref),
		LogDir: logDir, HealthTimeout: ref.StartTimeout.D(), StopTimeout: cfg.stopTimeout,
		FaultToken: token, Logger: cfg.log,
	}
	if ref.Proxies {
		links = netproxy.NewOn(proxyHost)
		lcfg.Links = links.Hook
	}
	if nsNet != nil {
		lcfg.Place = nsNet.Place
	}
	topo, err := launcher.Start(ctx, lcfg)
	if err != nil {
		if links != nil {
			links.Close()
		}
		if nsNet != nil {
			err = errors.Join(err, nsNet.Close())
		}
		return nil, fmt.Errorf("target: %w", err)
	}
	return &Embedded{topo: topo, links: links, token: token, netns: nsNet}, nil
}

// Embedded is the launcher's reference topology as a Target and a Supervisor.
type Embedded struct {
	topo  *launcher.Topology
	links *netproxy.Links
	token string     // "" when fault injection is off
	netns *netns.Net // nil unless reference.netns
}

// Topology is the launcher's topology behind the target.
func (t *Embedded) Topology() *launcher.Topology { return t.topo }

// URL implements Target: the router.
func (t *Embedded) URL() string { return t.topo.RouterURL }

// MetricsSources lists every worker's /metrics (the router holds no queues).
func (t *Embedded) MetricsSources() []Source {
	var out []Source
	for _, p := range t.topo.Processes() {
		if p.Role != launcher.RoleRouter {
			out = append(out, Source{Process: p.Name, URL: p.URL + "/metrics"})
		}
	}
	return out
}

// DebugSources lists /debug/requests of the router and of every worker.
func (t *Embedded) DebugSources() []Source {
	var out []Source
	for _, p := range t.topo.Processes() {
		out = append(out, Source{Process: p.Name, URL: p.URL + "/debug/requests"})
	}
	return out
}

// Stop implements Target.
func (t *Embedded) Stop(ctx context.Context) error {
	err := t.topo.Stop(ctx)
	if t.links != nil {
		t.links.Close()
	}
	if t.netns != nil {
		err = errors.Join(err, t.netns.Close())
	}
	return err
}

// Process implements Supervisor.
func (t *Embedded) Process(name string) (chaos.Process, error) {
	p, err := t.topo.Process(name)
	if err != nil {
		return chaos.Process{}, err
	}
	return chaos.Process{Name: p.Name, Role: p.Role, PID: p.PID, URL: p.URL}, nil
}

// Signal implements Supervisor.
func (t *Embedded) Signal(name string, sig syscall.Signal) error { return t.topo.Signal(name, sig) }

// Restart implements Supervisor.
func (t *Embedded) Restart(ctx context.Context, name string) error {
	return t.topo.Restart(ctx, name)
}

// Failpoints implements Supervisor: the process's token-protected admin API (workers
// and router alike).
func (t *Embedded) Failpoints(process string) (chaos.Failpoints, error) {
	if t.token == "" {
		return nil, fmt.Errorf("target: fault injection is off (reference.fault_injection): %w", chaos.ErrUnsupported)
	}
	p, err := t.topo.Process(process)
	if err != nil {
		return nil, err
	}
	return failpoint.NewClient(p.URL, t.token), nil
}

// Link implements Supervisor.
func (t *Embedded) Link(name string) (chaos.Link, error) {
	if t.links == nil {
		return nil, fmt.Errorf("target: no link proxies (reference.proxies): %w", chaos.ErrUnsupported)
	}
	return chaos.LinksFrom(t.links)(name)
}

// Colocated is a single `pdserver colocated` process as a Target and a Supervisor.
type Colocated struct {
	url   string
	proc  *supervisor.Process
	token string // "" when fault injection is off
}

func startColocated(ctx context.Context, cfg config, command []string, ref scenarios.Reference, token, logDir string) (*Colocated, error) {
	ports, err := freeport.Loopback(1) // not a closed :0 listener's: see freeport
	if err != nil {
		return nil, fmt.Errorf("target: free port: %w", err)
	}
	port := ports[0]
	argv := append(append([]string(nil), command...), ColocatedName)
	argv = append(argv, ReferenceArgs(ref)...)
	argv = append(argv, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	var env []string
	if token != "" {
		env = append(env, launcher.FaultTokenEnv+"="+token)
	}
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	timeout := ref.StartTimeout.D()
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	if err := mkdir(logDir); err != nil {
		return nil, err
	}
	p, err := supervisor.Start(ColocatedName, argv,
		supervisor.WithEnv(env...),
		supervisor.WithLog(filepath.Join(logDir, ColocatedName+".log")),
		supervisor.WithHealthURL(url+"/health"),
		supervisor.WithHealthTimeout(timeout),
		supervisor.WithStopTimeout(cfg.stopTimeout),
		supervisor.WithLogger(cfg.log))
	if err != nil {
		return nil, fmt.Errorf("target: colocated server: %w", err)
	}
	cfg.log.Info("colocated server started", "pid", p.PID(), "url", url, "log", p.LogPath())
	if err := p.WaitHealthy(ctx); err != nil {
		_ = p.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("target: colocated server: %w", err)
	}
	return &Colocated{url: url, proc: p, token: token}, nil
}

// URL implements Target.
func (t *Colocated) URL() string { return t.url }

// MetricsSources implements Target.
func (t *Colocated) MetricsSources() []Source {
	return []Source{{Process: ColocatedName, URL: t.url + "/metrics"}}
}

// DebugSources implements Target.
func (t *Colocated) DebugSources() []Source {
	return []Source{{Process: ColocatedName, URL: t.url + "/debug/requests"}}
}

// Stop implements Target: SIGTERM, then SIGKILL after the stop timeout or when ctx
// ends.
func (t *Colocated) Stop(ctx context.Context) error { return t.proc.Stop(ctx) }

// Process implements Supervisor.
func (t *Colocated) Process(name string) (chaos.Process, error) {
	if name != ColocatedName {
		return chaos.Process{}, fmt.Errorf("target: no process %q (colocated reference server)", name)
	}
	return chaos.Process{Name: ColocatedName, Role: ColocatedName, PID: t.proc.PID(), URL: t.url}, nil
}

// Signal implements Supervisor.
func (t *Colocated) Signal(name string, sig syscall.Signal) error {
	if _, err := t.Process(name); err != nil {
		return err
	}
	if err := t.proc.Signal(sig); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	return nil
}

// Restart implements Supervisor: the same argv on the same port.
func (t *Colocated) Restart(ctx context.Context, name string) error {
	if _, err := t.Process(name); err != nil {
		return err
	}
	if err := t.proc.Restart(ctx); err != nil {
		return fmt.Errorf("target: restart: %w", err)
	}
	return nil
}

// Failpoints implements Supervisor.
func (t *Colocated) Failpoints(process string) (chaos.Failpoints, error) {
	if t.token == "" {
		return nil, fmt.Errorf("target: fault injection is off (reference.fault_injection): %w", chaos.ErrUnsupported)
	}
	if _, err := t.Process(process); err != nil {
		return nil, err
	}
	return failpoint.NewClient(t.url, t.token), nil
}

// Link implements Supervisor (a single process has no links).
func (t *Colocated) Link(string) (chaos.Link, error) {
	return nil, fmt.Errorf("target: the colocated server has no links: %w", chaos.ErrUnsupported)
}
