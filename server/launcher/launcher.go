package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"pdsoak/internal/freeport"
	"pdsoak/supervisor"
)

// Defaults of Config.
const (
	// DefaultHealthTimeout bounds the wait for every process's /health at start and restart.
	DefaultHealthTimeout = 60 * time.Second
	// DefaultStopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	DefaultStopTimeout = 10 * time.Second
	// DefaultHost is the loopback address every process binds.
	DefaultHost = "127.0.0.1"
)

// FaultTokenEnv is the environment variable pdserver reads its fault-injection token
// from.
const FaultTokenEnv = "PDSOAK_FAULT_INJECTION_TOKEN"

// Roles of the processes.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
	RoleRouter  = "router"
)

// Config describes a local topology.
type Config struct {
	// Command is the pdserver executable and any prefix arguments, e.g. [os.Executable()]
	// or [harnessExe, "pdserver"]; the role subcommand and flags are appended.
	Command []string
	// Prefill and Decode are the numbers of workers (at least one each).
	Prefill, Decode int
	// Host is the address every process binds (DefaultHost when empty).
	Host string
	// Port is the router's port; 0 picks a free one.
	Port int
	// CommonArgs go to every worker, PrefillArgs / DecodeArgs to one role, RouterArgs to
	// the router. The launcher's own --host, --port and --disaggregation-bootstrap-port
	// come last and win.
	CommonArgs, PrefillArgs, DecodeArgs, RouterArgs []string
	// LogDir receives one <name>.log per process (stdout and stderr, appended across
	// restarts). Empty: a new temporary directory.
	LogDir string
	// Env is added to the children's environment (os.Environ() is inherited).
	Env []string
	// GoMaxProcs is the GOMAXPROCS every child runs with (procs.go). 0: each process's
	// share of the launcher's CPUs (ChildProcs); negative: not set (the Go runtime's
	// default, every CPU). A GOMAXPROCS in Env or in the launcher's own environment wins.
	GoMaxProcs int
	// FaultToken, when set, is the failpoint admin API's bearer token, passed to every
	// process (router and workers) in its environment as FaultTokenEnv (never in argv,
	// never logged).
	FaultToken string
	// HealthTimeout bounds the wait for /health (DefaultHealthTimeout when 0).
	HealthTimeout time.Duration
	// StopTimeout is the SIGTERM→SIGKILL bound of Stop (DefaultStopTimeout when 0).
	StopTimeout time.Duration
	// Links, when set, is asked for the address to use on each link instead of upstream
	// (host:port): "router->prefill-I", "router->decode-J" (HTTP) and "prefill-I->decode-J"
	// (KV). A fault proxy returns its own listen address; returning upstream leaves the
	// link direct.
	Links func(link, upstream string) (string, error)
	// Place, when set, is asked where each process runs (by name: prefill-0, decode-0,
	// router); ok false keeps it here. See Placement.
	Place func(name string) (p Placement, ok bool)
	// OnExit, when set, is called when a process exits without being asked to.
	OnExit func(Process)
	// Logger receives the launcher's own messages (slog.Default() when nil).
	Logger *slog.Logger
}

// Process describes one child process (a snapshot; see Topology.Processes).
type Process struct {
	Name string // prefill-0, decode-0, router
	Role string
	// URL is the process's HTTP base URL; BootstrapAddr is a prefill's KV address.
	URL, BootstrapAddr string
	PID                int
	LogPath            string
	Running            bool
	// Exit describes how the last run ended ("" while running).
	Exit     string
	Restarts int
	// Args are the arguments after Command.
	Args []string
}

// Placement runs a process elsewhere than the launcher's own network namespace, e.g. in
// its own one (package netns). Such a process has the network stack to itself, so its
// ports are fixed (PlacedPort, PlacedBootstrapPort; the router's is Config.Port when set)
// instead of picked here, where they could not be checked.
type Placement struct {
	// Host is the address the process binds and is reached at.
	Host string
	// Wrap is the argv prefix that puts the process there, e.g. ip netns exec NS; it
	// must exec the command, so that signals and the parent-death signal reach it.
	Wrap []string
}

// Ports of a placed process.
const (
	PlacedPort          = 8000
	PlacedBootstrapPort = 8998
)

// proc is one child: its addresses and its supervised process.
type proc struct {
	name, role         string
	host               string   // the address it binds (Config.Host unless placed)
	wrap               []string // argv prefix (placed only)
	placed             bool     // Config.Place placed it: fixed ports
	url, bootstrapAddr string
	logPath            string
	args               []string
	port               int
	assign             func() error // picks ports and sets port, url, args (and bootstrapAddr)
	fixedPort          bool         // the port was given: never moved
	sup                *supervisor.Process
}

// Topology is a running router with its prefill and decode workers.
type Topology struct {
	// RouterURL is the router's base URL (http://host:port).
	RouterURL string
	// LogDir is where the processes' logs are.
	LogDir string

	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	procs []*proc
}

// Start launches Prefill prefill workers and Decode decode workers, waits for their
// /health, starts the router pointing at them and waits for its /health. On any failure
// everything already started is stopped.
func Start(ctx context.Context, cfg Config) (*Topology, error) {
	if len(cfg.Command) == 0 {
		return nil, errors.New("launcher: Command is empty")
	}
	if cfg.Prefill < 1 || cfg.Decode < 1 {
		return nil, fmt.Errorf("launcher: need at least one prefill and one decode (got %d, %d)", cfg.Prefill, cfg.Decode)
	}
	if cfg.Host == "" {
		cfg.Host = DefaultHost
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = DefaultHealthTimeout
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Links == nil {
		cfg.Links = func(_, upstream string) (string, error) { return upstream, nil }
	}
	if cfg.LogDir == "" {
		dir, err := os.MkdirTemp("", "pdsoak-topology-")
		if err != nil {
			return nil, fmt.Errorf("launcher: %w", err)
		}
		cfg.LogDir = dir
	} else if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	t := &Topology{cfg: cfg, LogDir: cfg.LogDir, log: cfg.Logger}
	if t.log == nil {
		t.log = slog.Default()
	}
	if err := t.start(ctx); err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.StopTimeout+time.Second)
		defer cancel()
		_ = t.Stop(sctx)
		return nil, err
	}
	return t, nil
}

// portRetries is how many times a worker or the router is started again on new ports
// when another process took its free port between the pick and the bind.
const portRetries = 3

func (t *Topology) start(ctx context.Context) error {
	cfg := t.cfg
	var workers []*proc
	for i := 0; i < cfg.Prefill; i++ {
		p := t.newProc(fmt.Sprintf("prefill-%d", i), RolePrefill)
		p.assign = func() error {
			port, err := t.port(p, PlacedPort)
			if err != nil {
				return err
			}
			boot, err := t.port(p, PlacedBootstrapPort)
			if err != nil {
				return err
			}
			args := append([]string{RolePrefill}, cfg.CommonArgs...)
			args = append(args, cfg.PrefillArgs...)
			args = append(args, "--host", p.host, "--port", strconv.Itoa(port), "--disaggregation-bootstrap-port", strconv.Itoa(boot))
			t.setAddr(p, port, args)
			t.mu.Lock()
			p.bootstrapAddr = hostPort(p.host, boot)
			t.mu.Unlock()
			return nil
		}
		workers = append(workers, p)
	}
	for j := 0; j < cfg.Decode; j++ {
		p := t.newProc(fmt.Sprintf("decode-%d", j), RoleDecode)
		p.assign = func() error {
			port, err := t.port(p, PlacedPort)
			if err != nil {
				return err
			}
			args := append([]string{RoleDecode}, cfg.CommonArgs...)
			args = append(args, cfg.DecodeArgs...)
			args = append(args, "--host", p.host, "--port", strconv.Itoa(port))
			t.setAddr(p, port, args)
			return nil
		}
		workers = append(workers, p)
	}
	if err := t.launch(ctx, workers); err != nil {
		return err
	}

	var links []string
	for i := 0; i < cfg.Prefill; i++ {
		p := workers[i]
		addr, err := cfg.Links(fmt.Sprintf("router->%s", p.name), hostPort(p.host, p.port))
		if err != nil {
			return fmt.Errorf("launcher: link router->%s: %w", p.name, err)
		}
		links = append(links, "--prefill", "http://"+addr, "--prefill-bootstrap", p.bootstrapAddr)
		for j := 0; j < cfg.Decode; j++ {
			link := fmt.Sprintf("%s->decode-%d", p.name, j)
			kv, err := cfg.Links(link, p.bootstrapAddr)
			if err != nil {
				return fmt.Errorf("launcher: link %s: %w", link, err)
			}
			if kv != p.bootstrapAddr {
				links = append(links, "--kv-link", fmt.Sprintf("%d:%d=%s", i, j, kv))
			}
		}
	}
	for j := 0; j < cfg.Decode; j++ {
		d := workers[cfg.Prefill+j]
		addr, err := cfg.Links(fmt.Sprintf("router->%s", d.name), hostPort(d.host, d.port))
		if err != nil {
			return fmt.Errorf("launcher: link router->%s: %w", d.name, err)
		}
		links = append(links, "--decode", "http://"+addr)
	}
	r := t.newProc("router", RoleRouter)
	r.assign = func() error {
		rport := cfg.Port
		if rport == 0 {
			var err error
			if rport, err = t.port(r, PlacedPort); err != nil {
				return err
			}
		}
		args := append([]string{RoleRouter}, cfg.RouterArgs...)
		args = append(args, "--host", r.host, "--port", strconv.Itoa(rport))
		t.setAddr(r, rport, append(args, links...))
		return nil
	}
	r.fixedPort = r.fixedPort || cfg.Port != 0
	if err := t.launch(ctx, []*proc{r}); err != nil {
		return err
	}
	t.RouterURL = r.url
	t.log.Info("launcher: topology up", "router", t.RouterURL, "prefill", cfg.Prefill, "decode", cfg.Decode, "logs", cfg.LogDir)
	return nil
}

// launch assigns ports to ps, starts them and waits for their /health. A process that
// exits because its port was taken meanwhile is started again on new ports.
func (t *Topology) launch(ctx context.Context, ps []*proc) error {
	for attempt := 0; ; attempt++ {
		for _, p := range ps {
			if err := p.assign(); err != nil {
				return err
			}
			if err := t.run(p); err != nil {
				return err
			}
		}
		var retry []*proc
		for _, p := range ps {
			err := p.sup.WaitHealthy(ctx)
			if err == nil {
				continue
			}
			if attempt < portRetries && !p.fixedPort && portTaken(p.sup) {
				t.log.Warn("launcher: port taken by another process, retrying on new ports", "name", p.name, "url", p.url)
				retry = append(retry, p)
				continue
			}
			return fmt.Errorf("launcher: %w", err)
		}
		if len(retry) == 0 {
			return nil
		}
		ps = retry
	}
}

// portTaken reports whether the process has exited and its last run's log says a
// port was in use.
func portTaken(sp *supervisor.Process) bool {
	if sp.Running() {
		return false
	}
	b, err := sp.RunLog()
	return err == nil && bytes.Contains(b, []byte("address already in use"))
}

func (t *Topology) setAddr(p *proc, port int, args []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.port, p.args, p.url = port, args, "http://"+hostPort(p.host, port)
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

func (t *Topology) newProc(name, role string) *proc {
	p := &proc{name: name, role: role, host: t.cfg.Host, logPath: filepath.Join(t.cfg.LogDir, name+".log")}
	if t.cfg.Place != nil {
		if pl, ok := t.cfg.Place(name); ok {
			p.host, p.wrap, p.placed, p.fixedPort = pl.Host, pl.Wrap, true, true
		}
	}
	t.mu.Lock()
	t.procs = append(t.procs, p)
	t.mu.Unlock()
	return p
}

// port is placed's fixed port for a placed process, else a free one here.
func (t *Topology) port(p *proc, placed int) (int, error) {
	if p.placed {
		return placed, nil
	}
	return freePort(p.host)
}

// freePort is a port free on host now, below the kernel's ephemeral range (freeport:
// a closed port-0 listener's port soon goes to another socket, and the process that
// is told it finds it taken).
func freePort(host string) (int, error) {
	ps, err := freeport.On(host, 1)
	if err != nil {
		return 0, fmt.Errorf("launcher: no free port on %s: %w", host, err)
	}
	return ps[0], nil
}

// run starts p's process under a supervisor (a new one: the arguments may have
// changed). The fault-injection token goes into the environment of every process, the
// router's included (its --enable-fault-injection serves the same admin API), never
// into argv: argv is visible to every local user in ps.
func (t *Topology) run(p *proc) error {
	t.mu.Lock()
	argv := append(append(append([]string(nil), p.wrap...), t.cfg.Command...), p.args...)
	url := p.url
	t.mu.Unlock()
	env := append([]string(nil), t.cfg.Env...)
	if v, ok := t.goMaxProcsEnv(); ok {
		env = append(env, v)
	}
	if t.cfg.FaultToken != "" {
		env = append(env, FaultTokenEnv+"="+t.cfg.FaultToken)
	}
	sp, err := supervisor.Start(p.name, argv,
		supervisor.WithEnv(env...),
		supervisor.WithLog(p.logPath),
		supervisor.WithHealthURL(url+"/health"),
		supervisor.WithHealthTimeout(t.cfg.HealthTimeout),
		supervisor.WithStopTimeout(t.cfg.StopTimeout),
		supervisor.WithLogger(t.log),
		supervisor.WithOnExit(func(_ *supervisor.Process, e supervisor.Exit) {
			if !e.Expected && t.cfg.OnExit != nil {
				t.cfg.OnExit(t.snapshot(p))
			}
		}))
	if err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	t.mu.Lock()
	p.sup = sp
	t.mu.Unlock()
	t.log.Info("launcher: started", "name", p.name, "pid", sp.PID(), "url", url, "log", p.logPath)
	return nil
}

// snapshot describes p now.
func (t *Topology) snapshot(p *proc) Process {
	t.mu.Lock()
	out := Process{Name: p.name, Role: p.role, URL: p.url, BootstrapAddr: p.bootstrapAddr, LogPath: p.logPath,
		Args: append([]string(nil), p.args...)}
	sp := p.sup
	t.mu.Unlock()
	if sp != nil {
		out.PID, out.Running, out.Restarts = sp.PID(), sp.Running(), sp.Restarts()
		if !out.Running {
			out.Exit = sp.Exit().Status
		}
	}
	return out
}

// Processes returns a snapshot of every process.
func (t *Topology) Processes() []*Process {
	t.mu.Lock()
	procs := append([]*proc(nil), t.procs...)
	t.mu.Unlock()
	out := make([]*Process, 0, len(procs))
	for _, p := range procs {
		s := t.snapshot(p)
		out = append(out, &s)
	}
	return out
}

// Process returns a snapshot of the named process.
func (t *Topology) Process(name string) (*Process, error) {
	p, err := t.find(name)
	if err != nil {
		return nil, err
	}
	s := t.snapshot(p)
	return &s, nil
}

// Supervised returns the named process's supervisor (for its /proc state, log, ...).
func (t *Topology) Supervised(name string) (*supervisor.Process, error) {
	p, err := t.find(name)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.sup == nil {
		return nil, fmt.Errorf("launcher: %s was never started", name)
	}
	return p.sup, nil
}

func (t *Topology) find(name string) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		if p.name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("launcher: no process %q", name)
}

// Signal sends sig to the named process's group (for example SIGSTOP / SIGCONT to
// freeze it).
func (t *Topology) Signal(name string, sig syscall.Signal) error {
	sp, err := t.Supervised(name)
	if err != nil {
		return err
	}
	if err := sp.Signal(sig); err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	return nil
}

// Kill sends SIGKILL to the named process and waits until it has been reaped.
func (t *Topology) Kill(name string) error {
	sp, err := t.Supervised(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.StopTimeout)
	defer cancel()
	if err := sp.Kill(ctx); err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	return nil
}

// Restart stops the named process if it runs (SIGTERM, then SIGKILL after the stop
// timeout), starts it again with the same arguments and ports, and waits for its
// /health.
func (t *Topology) Restart(ctx context.Context, name string) error {
	sp, err := t.Supervised(name)
	if err != nil {
		return err
	}
	if err := sp.Restart(ctx); err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	return nil
}

// Stop ends every process (the router first, then the workers, in parallel within each
// step) and waits for them. ctx cuts the SIGTERM grace short (SIGKILL at once).
func (t *Topology) Stop(ctx context.Context) error {
	t.mu.Lock()
	var router, workers []*supervisor.Process
	for _, p := range t.procs {
		switch {
		case p.sup == nil:
		case p.role == RoleRouter:
			router = append(router, p.sup)
		default:
			workers = append(workers, p.sup)
		}
	}
	t.mu.Unlock()
	var errs []error
	var mu sync.Mutex
	for _, group := range [][]*supervisor.Process{router, workers} {
		var wg sync.WaitGroup
		for _, sp := range group {
			wg.Go(func() {
				if err := sp.Stop(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	return nil
}
