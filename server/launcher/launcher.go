package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
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
	// HealthTimeout bounds the wait for /health (DefaultHealthTimeout when 0).
	HealthTimeout time.Duration
	// StopTimeout is the SIGTERM→SIGKILL bound of Stop (DefaultStopTimeout when 0).
	StopTimeout time.Duration
	// Links, when set, is asked for the address to use on each link instead of upstream
	// (host:port): "router->prefill-I", "router->decode-J" (HTTP) and "prefill-I->decode-J"
	// (KV). A fault proxy returns its own listen address; returning upstream leaves the
	// link direct.
	Links func(link, upstream string) (string, error)
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

// proc is the live state of one child.
type proc struct {
	Process
	port      int
	assign    func() error // picks ports and sets port, URL, Args (and BootstrapAddr)
	fixedPort bool         // the port was given: never moved
	logOffset int64        // size of the log when the current run started
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the current run has been reaped
	stopping  bool          // the launcher asked it to end
}

// Topology is a running router with its prefill and decode workers.
type Topology struct {
	// RouterURL is the router's base URL (http://host:port).
	RouterURL string
	// LogDir is where the processes' logs are.
	LogDir string

	cfg   Config
	log   *slog.Logger
	spawn chan spawnReq
	quit  chan struct{}
	once  sync.Once

	mu    sync.Mutex
	procs []*proc
	wg    sync.WaitGroup
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
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
	t := &Topology{cfg: cfg, LogDir: cfg.LogDir, log: cfg.Logger, spawn: make(chan spawnReq), quit: make(chan struct{})}
	if t.log == nil {
		t.log = slog.Default()
	}
	t.wg.Add(1)
	go t.spawner()
	if err := t.start(ctx); err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.StopTimeout+time.Second)
		defer cancel()
		_ = t.Stop(sctx)
		return nil, err
	}
	return t, nil
}

// spawner starts every child from one locked OS thread that lives as long as the
// topology: Pdeathsig fires when the thread that forked the child ends, so this thread
// must not be reused or retired by the runtime before the children are stopped.
func (t *Topology) spawner() {
	defer t.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		select {
		case r := <-t.spawn:
			r.errc <- r.cmd.Start()
		case <-t.quit:
			return
		}
	}
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
			port, err := freePort(cfg.Host)
			if err != nil {
				return err
			}
			boot, err := freePort(cfg.Host)
			if err != nil {
				return err
			}
			args := append([]string{RolePrefill}, cfg.CommonArgs...)
			args = append(args, cfg.PrefillArgs...)
			args = append(args, "--host", cfg.Host, "--port", strconv.Itoa(port), "--disaggregation-bootstrap-port", strconv.Itoa(boot))
			t.setAddr(p, port, args)
			t.mu.Lock()
			p.BootstrapAddr = hostPort(cfg.Host, boot)
			t.mu.Unlock()
			return nil
		}
		workers = append(workers, p)
	}
	for j := 0; j < cfg.Decode; j++ {
		p := t.newProc(fmt.Sprintf("decode-%d", j), RoleDecode)
		p.assign = func() error {
			port, err := freePort(cfg.Host)
			if err != nil {
				return err
			}
			args := append([]string{RoleDecode}, cfg.CommonArgs...)
			args = append(args, cfg.DecodeArgs...)
			args = append(args, "--host", cfg.Host, "--port", strconv.Itoa(port))
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
		addr, err := cfg.Links(fmt.Sprintf("router->%s", p.Name), hostPort(cfg.Host, p.port))
		if err != nil {
			return fmt.Errorf("launcher: link router->%s: %w", p.Name, err)
		}
		links = append(links, "--prefill", "http://"+addr, "--prefill-bootstrap", p.BootstrapAddr)
		for j := 0; j < cfg.Decode; j++ {
			link := fmt.Sprintf("%s->decode-%d", p.Name, j)
			kv, err := cfg.Links(link, p.BootstrapAddr)
			if err != nil {
				return fmt.Errorf("launcher: link %s: %w", link, err)
			}
			if kv != p.BootstrapAddr {
				links = append(links, "--kv-link", fmt.Sprintf("%d:%d=%s", i, j, kv))
			}
		}
	}
	for j := 0; j < cfg.Decode; j++ {
		d := workers[cfg.Prefill+j]
		addr, err := cfg.Links(fmt.Sprintf("router->%s", d.Name), hostPort(cfg.Host, d.port))
		if err != nil {
			return fmt.Errorf("launcher: link router->%s: %w", d.Name, err)
		}
		links = append(links, "--decode", "http://"+addr)
	}
	r := t.newProc("router", RoleRouter)
	r.assign = func() error {
		rport := cfg.Port
		if rport == 0 {
			var err error
			if rport, err = freePort(cfg.Host); err != nil {
				return err
			}
		}
		args := append([]string{RoleRouter}, cfg.RouterArgs...)
		args = append(args, "--host", cfg.Host, "--port", strconv.Itoa(rport))
		t.setAddr(r, rport, append(args, links...))
		return nil
	}
	r.fixedPort = cfg.Port != 0
	if err := t.launch(ctx, []*proc{r}); err != nil {
		return err
	}
	t.RouterURL = r.URL
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
			err := t.waitHealthy(ctx, p)
			if err == nil {
				continue
			}
			if attempt < portRetries && !p.fixedPort && t.portTaken(p) {
				t.log.Warn("launcher: port taken by another process, retrying on new ports", "name", p.Name, "url", p.URL)
				retry = append(retry, p)
				continue
			}
			return err
		}
		if len(retry) == 0 {
			return nil
		}
		ps = retry
	}
}

// portTaken reports whether p has exited and its last run's log says a port was in use.
func (t *Topology) portTaken(p *proc) bool {
	t.mu.Lock()
	running, off := p.Running, p.logOffset
	t.mu.Unlock()
	if running {
		return false
	}
	b, err := os.ReadFile(p.LogPath)
	if err != nil || int64(len(b)) < off {
		return false
	}
	return bytes.Contains(b[off:], []byte("address already in use"))
}

func (t *Topology) setAddr(p *proc, port int, args []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.port, p.Args, p.URL = port, args, "http://"+hostPort(t.cfg.Host, port)
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

func (t *Topology) newProc(name, role string) *proc {
	p := &proc{Process: Process{Name: name, Role: role, LogPath: filepath.Join(t.cfg.LogDir, name+".log")}}
	t.mu.Lock()
	t.procs = append(t.procs, p)
	t.mu.Unlock()
	return p
}

// freePort asks the kernel for a free port on host.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("launcher: no free port on %s: %w", host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// run starts p's process (again) and a goroutine that reaps it.
func (t *Topology) run(p *proc) error {
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("launcher: %s: %w", p.Name, err)
	}
	var off int64
	if st, err := logf.Stat(); err == nil {
		off = st.Size()
	}
	argv := append(append([]string(nil), t.cfg.Command[1:]...), p.Args...)
	cmd := exec.Command(t.cfg.Command[0], argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), t.cfg.Env...)
	// Own process group (signals to the group reach grandchildren; the terminal's ^C does
	// not reach children behind our back), and SIGKILL if the launcher dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	errc := make(chan error, 1)
	select {
	case t.spawn <- spawnReq{cmd, errc}:
	case <-t.quit:
		logf.Close()
		return fmt.Errorf("launcher: %s: topology stopped", p.Name)
	}
	if err := <-errc; err != nil {
		logf.Close()
		return fmt.Errorf("launcher: start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	t.mu.Lock()
	p.cmd, p.exited, p.stopping, p.logOffset = cmd, exited, false, off
	p.PID, p.Running, p.Exit = cmd.Process.Pid, true, ""
	t.mu.Unlock()
	t.log.Info("launcher: started", "name", p.Name, "pid", cmd.Process.Pid, "url", p.URL, "log", p.LogPath)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		werr := cmd.Wait()
		logf.Close()
		t.mu.Lock()
		p.Running = false
		p.Exit = exitString(werr)
		expected := p.stopping
		snap := p.Process
		t.mu.Unlock()
		close(exited)
		if !expected {
			t.log.Warn("launcher: process exited unexpectedly", "name", p.Name, "pid", snap.PID, "exit", snap.Exit, "log", p.LogPath)
			if t.cfg.OnExit != nil {
				t.cfg.OnExit(snap)
			}
		}
	}()
	return nil
}

func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal: " + ws.Signal().String()
		}
	}
	return err.Error()
}

// waitHealthy polls each process's /health until 200; it fails early when one exits.
func (t *Topology) waitHealthy(ctx context.Context, ps ...*proc) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.HealthTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, p := range ps {
		t.mu.Lock()
		exited := p.exited
		t.mu.Unlock()
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/health", nil)
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			tm := time.NewTimer(50 * time.Millisecond)
			select {
			case <-exited:
				tm.Stop()
				t.mu.Lock()
				exit := p.Exit
				t.mu.Unlock()
				return fmt.Errorf("launcher: %s exited before it was healthy (%s); log %s:\n%s", p.Name, exit, p.LogPath, tail(p.LogPath, 2048))
			case <-ctx.Done():
				tm.Stop()
				return fmt.Errorf("launcher: %s not healthy within %s (last: %v); log %s:\n%s", p.Name, t.cfg.HealthTimeout, err, p.LogPath, tail(p.LogPath, 2048))
			case <-tm.C:
			}
		}
	}
	return nil
}

// tail returns the last n bytes of a file.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(bytes.TrimSpace(b))
}

// Processes returns a snapshot of every process.
func (t *Topology) Processes() []*Process {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Process, 0, len(t.procs))
	for _, p := range t.procs {
		c := p.Process
		c.Args = append([]string(nil), p.Args...)
		out = append(out, &c)
	}
	return out
}

// Process returns a snapshot of the named process.
func (t *Topology) Process(name string) (*Process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, err := t.findLocked(name)
	if err != nil {
		return nil, err
	}
	c := p.Process
	return &c, nil
}

func (t *Topology) findLocked(name string) (*proc, error) {
	for _, p := range t.procs {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("launcher: no process %q", name)
}

// Signal sends sig to the named process (for example SIGSTOP / SIGCONT to freeze it).
func (t *Topology) Signal(name string, sig syscall.Signal) error {
	t.mu.Lock()
	p, err := t.findLocked(name)
	if err == nil && !p.Running {
		err = fmt.Errorf("launcher: %s is not running (%s)", name, p.Exit)
	}
	var pid int
	if err == nil {
		pid = p.PID
		if sig == syscall.SIGKILL || sig == syscall.SIGTERM || sig == syscall.SIGINT {
			p.stopping = true // asked for: not "unexpected"
		}
	}
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("launcher: signal %s to %s: %w", sig, name, err)
	}
	return nil
}

// Kill sends SIGKILL to the named process and waits until it has been reaped.
func (t *Topology) Kill(name string) error {
	t.mu.Lock()
	p, err := t.findLocked(name)
	var exited chan struct{}
	if err == nil {
		exited = p.exited
	}
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if err := t.Signal(name, syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(t.cfg.StopTimeout):
		return fmt.Errorf("launcher: %s not reaped after SIGKILL", name)
	}
}

// Restart stops the named process if it runs (SIGTERM, then SIGKILL after the stop
// timeout), starts it again with the same arguments and ports, and waits for its
// /health.
func (t *Topology) Restart(ctx context.Context, name string) error {
	t.mu.Lock()
	p, err := t.findLocked(name)
	t.mu.Unlock()
	if err != nil {
		return err
	}
	t.stopProc(ctx, p)
	t.mu.Lock()
	p.Restarts++
	t.mu.Unlock()
	if err := t.run(p); err != nil {
		return err
	}
	return t.waitHealthy(ctx, p)
}

// stopProc ends one process: SIGTERM to its group, SIGKILL after the bound.
func (t *Topology) stopProc(ctx context.Context, p *proc) {
	t.mu.Lock()
	running, pid, exited := p.Running, p.PID, p.exited
	p.stopping = true
	t.mu.Unlock()
	if !running {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	_ = syscall.Kill(-pid, syscall.SIGCONT) // a paused (SIGSTOP) process must run to handle it
	tm := time.NewTimer(t.cfg.StopTimeout)
	defer tm.Stop()
	select {
	case <-exited:
		return
	case <-tm.C:
	case <-ctx.Done():
	}
	t.log.Warn("launcher: process ignored SIGTERM, killing", "name", p.Name, "pid", pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-exited
}

// Stop ends every process (the router first, then the workers, in parallel within each
// step) and waits for them. ctx cuts the SIGTERM grace short (SIGKILL at once).
func (t *Topology) Stop(ctx context.Context) error {
	t.mu.Lock()
	procs := append([]*proc(nil), t.procs...)
	t.mu.Unlock()
	var router, workers []*proc
	for _, p := range procs {
		if p.Role == RoleRouter {
			router = append(router, p)
		} else {
			workers = append(workers, p)
		}
	}
	for _, group := range [][]*proc{router, workers} {
		var wg sync.WaitGroup
		for _, p := range group {
			wg.Add(1)
			go func() { defer wg.Done(); t.stopProc(ctx, p) }()
		}
		wg.Wait()
	}
	t.once.Do(func() { close(t.quit) })
	t.wg.Wait()
	return nil
}
