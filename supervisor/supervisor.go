package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the options.
const (
	// DefaultStopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	DefaultStopTimeout = 10 * time.Second
	// DefaultReapTimeout bounds Stop's wait for the process to be reaped after SIGKILL.
	// Exit after SIGKILL takes a process's teardown in the kernel (a GPU process freeing
	// its device memory: seconds); past this bound it is stuck (NotReapedWhy).
	DefaultReapTimeout = 30 * time.Second
	// DefaultHealthTimeout bounds WaitHealthy.
	DefaultHealthTimeout = 60 * time.Second
	// DefaultHealthBackoff is the first pause between health checks; it doubles after
	// every failed check up to DefaultHealthBackoffMax.
	DefaultHealthBackoff    = 50 * time.Millisecond
	DefaultHealthBackoffMax = time.Second
	// DefaultHealthRequestTimeout bounds one health request.
	DefaultHealthRequestTimeout = 2 * time.Second
	// DefaultRestartEvery and DefaultRestartBurst limit restarts: a burst of
	// DefaultRestartBurst, then one per DefaultRestartEvery.
	DefaultRestartEvery = time.Second
	DefaultRestartBurst = 5
)

// ErrNotReaped is wrapped by Stop when the process is still not reaped the reap timeout
// after SIGKILL; the error says why (NotReapedWhy).
var ErrNotReaped = errors.New("supervisor: not reaped after SIGKILL")

// ErrExited is returned by WaitHealthy when the process exits before it is healthy.
var ErrExited = errors.New("supervisor: process exited")

// ErrOutlived: the health URL still answers once the process group is gone, so the
// server runs outside the group (docker run's container, a launcher that calls setsid)
// and a restart would only start a second copy beside it.
var ErrOutlived = errors.New("supervisor: the server outlived its process group")

// Exit describes how one run of a process ended.
type Exit struct {
	PID int
	// Status is "exit status N" or "signal: NAME".
	Status string
	// Expected is true when the exit was asked for (Stop, Restart, Kill or a terminating
	// Signal).
	Expected bool
}

// Option configures Start.
type Option func(*config)

type config struct {
	env                 []string
	logPath             string
	healthURL           string
	stopTimeout         time.Duration
	reapTimeout         time.Duration
	healthTimeout       time.Duration
	backoff, backoffMax time.Duration
	healthReqTimeout    time.Duration
	restartEvery        time.Duration
	restartBurst        int
	logger              *slog.Logger
	onExit              func(*Process, Exit)
	client              *http.Client
}

// WithEnv adds KEY=value entries to the child's environment (os.Environ() is
// inherited). The entries are never logged: pass secrets here, not in argv.
func WithEnv(kv ...string) Option { return func(c *config) { c.env = append(c.env, kv...) } }

// WithLog sends the child's stdout and stderr to path, appended across restarts
// (default: discarded).
func WithLog(path string) Option { return func(c *config) { c.logPath = path } }

// WithHealthURL is the URL WaitHealthy polls until it answers 200 (default: none;
// WaitHealthy then returns at once while the process runs).
func WithHealthURL(url string) Option { return func(c *config) { c.healthURL = url } }

// WithStopTimeout sets the SIGTERM→SIGKILL bound of Stop and Restart (<= 0: default).
func WithStopTimeout(d time.Duration) Option { return func(c *config) { c.stopTimeout = d } }

// WithReapTimeout bounds Stop's wait for the reap after SIGKILL (<= 0: default).
func WithReapTimeout(d time.Duration) Option { return func(c *config) { c.reapTimeout = d } }

// WithHealthTimeout bounds WaitHealthy (<= 0: default).
func WithHealthTimeout(d time.Duration) Option { return func(c *config) { c.healthTimeout = d } }

// WithHealthBackoff sets the first and the largest pause between health checks.
func WithHealthBackoff(first, max time.Duration) Option {
	return func(c *config) { c.backoff, c.backoffMax = first, max }
}

// WithRestartLimit lets burst restarts through at once, then one per every.
func WithRestartLimit(every time.Duration, burst int) Option {
	return func(c *config) { c.restartEvery, c.restartBurst = every, burst }
}

// WithLogger receives the supervisor's own messages (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithOnExit is called (from the process's goroutine) after every run ends, asked for
// or not. It must not Stop, Kill or Restart the same process: those wait for it.
func WithOnExit(f func(*Process, Exit)) Option { return func(c *config) { c.onExit = f } }

// Process is one supervised child process, possibly restarted.
type Process struct {
	name string
	argv []string
	cfg  config
	log  *slog.Logger
	lim  *rate.Limiter // restarts

	mu        sync.Mutex
	pid       int
	exited    chan struct{} // closed when the current run has been reaped
	exit      Exit
	expected  bool  // the current run was asked to end
	logOffset int64 // size of the log when the current run started
	restarts  int
	wg        sync.WaitGroup
}

// Start starts argv (argv[0] is looked up in PATH) as the process called name.
func Start(name string, argv []string, opts ...Option) (*Process, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("supervisor: %s: empty command", name)
	}
	cfg := config{
		stopTimeout: DefaultStopTimeout, healthTimeout: DefaultHealthTimeout,
		backoff: DefaultHealthBackoff, backoffMax: DefaultHealthBackoffMax,
		healthReqTimeout: DefaultHealthRequestTimeout,
		restartEvery:     DefaultRestartEvery, restartBurst: DefaultRestartBurst,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.reapTimeout <= 0 {
		cfg.reapTimeout = DefaultReapTimeout
	}
	if cfg.stopTimeout <= 0 {
		cfg.stopTimeout = DefaultStopTimeout
	}
	if cfg.healthTimeout <= 0 {
		cfg.healthTimeout = DefaultHealthTimeout
	}
	if cfg.backoff <= 0 {
		cfg.backoff = DefaultHealthBackoff
	}
	if cfg.backoffMax < cfg.backoff {
		cfg.backoffMax = cfg.backoff
	}
	if cfg.restartBurst < 1 {
		cfg.restartBurst = 1
	}
	cfg.client = &http.Client{Timeout: cfg.healthReqTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	p := &Process{name: name, argv: append([]string(nil), argv...), cfg: cfg, log: cfg.logger,
		lim: rate.NewLimiter(rate.Every(cfg.restartEvery), cfg.restartBurst)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if err := p.run(); err != nil {
		return nil, err
	}
	return p, nil
}

// run starts one run of the process and the goroutine that owns it.
func (p *Process) run() error {
	out := io.Discard
	var logf *os.File
	var off int64
	if p.cfg.logPath != "" {
		var err error
		logf, err = os.OpenFile(p.cfg.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("supervisor: %s: %w", p.name, err)
		}
		if st, err := logf.Stat(); err == nil {
			off = st.Size()
		}
		out = logf
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), p.cfg.env...)
	// Own process group: a signal to the group reaches grandchildren, and the terminal's
	// ^C does not reach children behind our back. SIGKILL when we die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	exited := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// Pdeathsig fires when the forking thread ends: keep it locked (so the runtime
		// never retires it) until the child has been reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if logf != nil {
			defer logf.Close()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.mu.Lock()
		p.pid, p.exited, p.expected, p.logOffset, p.exit = cmd.Process.Pid, exited, false, off, Exit{}
		p.mu.Unlock()
		started <- nil
		werr := cmd.Wait()
		p.mu.Lock()
		p.exit = Exit{PID: cmd.Process.Pid, Status: exitString(werr), Expected: p.expected}
		ex := p.exit
		p.mu.Unlock()
		close(exited)
		if !ex.Expected {
			p.log.Warn("supervisor: process exited unexpectedly", "name", p.name, "pid", ex.PID, "exit", ex.Status, "log", p.cfg.logPath)
		}
		if p.cfg.onExit != nil {
			p.cfg.onExit(p, ex)
		}
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("supervisor: start %s: %w", p.name, err)
	}
	p.log.Debug("supervisor: started", "name", p.name, "pid", p.PID(), "log", p.cfg.logPath)
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

// Name is the process's name.
func (p *Process) Name() string { return p.name }

// Args returns a copy of argv.
func (p *Process) Args() []string { return append([]string(nil), p.argv...) }

// LogPath is the log file ("" when the output is discarded).
func (p *Process) LogPath() string { return p.cfg.logPath }

// PID is the pid of the current (or last) run.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Restarts counts the restarts so far.
func (p *Process) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Exited is closed when the current run has ended and been reaped.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Running reports whether the current run has not been reaped yet (a stopped process
// runs; see State).
func (p *Process) Running() bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

// Exit describes how the last run ended (zero while it runs).
func (p *Process) Exit() Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// State reads the current run's state from /proc.
func (p *Process) State() (State, error) {
	if !p.Running() {
		return StateGone, nil
	}
	return ReadState(p.PID())
}

// RunLog returns what the current (or last) run has written to its log.
func (p *Process) RunLog() ([]byte, error) {
	if p.cfg.logPath == "" {
		return nil, nil
	}
	p.mu.Lock()
	off := p.logOffset
	p.mu.Unlock()
	b, err := os.ReadFile(p.cfg.logPath)
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	if int64(len(b)) < off {
		return nil, nil
	}
	return b[off:], nil
}

// Tail returns the last n bytes of the log, trimmed.
func (p *Process) Tail(n int64) string {
	if p.cfg.logPath == "" {
		return ""
	}
	f, err := os.Open(p.cfg.logPath)
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

// WaitHealthy polls the health URL until it answers 200, with a capped exponential
// backoff between checks. It fails when the process exits first (wrapping ErrExited,
// with the log's tail), when the health timeout passes or when ctx ends.
func (p *Process) WaitHealthy(ctx context.Context) error {
	exited := p.Exited()
	if p.cfg.healthURL == "" {
		select {
		case <-exited:
			return p.exitedErr()
		default:
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.healthTimeout)
	defer cancel()
	next := p.cfg.backoff
	lim := rate.NewLimiter(rate.Every(next), 1)
	var last error
	for {
		r := lim.Reserve()
		tm := time.NewTimer(r.Delay())
		select {
		case <-exited:
			tm.Stop()
			return p.exitedErr()
		case <-ctx.Done():
			tm.Stop()
			if errors.Is(ctx.Err(), context.Canceled) {
				return fmt.Errorf("supervisor: %s: health wait: %w", p.name, ctx.Err())
			}
			return fmt.Errorf("supervisor: %s not healthy at %s within %s (last: %v); log %s:\n%s",
				p.name, p.cfg.healthURL, p.cfg.healthTimeout, last, p.cfg.logPath, p.Tail(2048))
		case <-tm.C:
		}
		if last = p.check(ctx); last == nil {
			return nil
		}
		next = min(2*next, p.cfg.backoffMax)
		lim.SetLimit(rate.Every(next))
	}
}

func (p *Process) exitedErr() error {
	return fmt.Errorf("supervisor: %s exited before it was healthy (%s); log %s:\n%s: %w",
		p.name, p.Exit().Status, p.cfg.logPath, p.Tail(2048), ErrExited)
}

func (p *Process) check(ctx context.Context) error {
	status, err := p.get(ctx)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("status %d", status)
	}
	return nil
}

// get sends one GET of the health URL: the status of any answer.
func (p *Process) get(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cfg.healthURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.cfg.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Signal sends sig to the process group. SIGKILL, SIGTERM and SIGINT mark the exit
// as asked for (OnExit sees Expected).
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	pid, exited := p.pid, p.exited
	select {
	case <-exited:
		st := p.exit.Status
		p.mu.Unlock()
		return fmt.Errorf("supervisor: %s is not running (%s)", p.name, st)
	default:
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM || sig == syscall.SIGINT {
		p.expected = true
	}
	p.mu.Unlock()
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("supervisor: signal %s to %s: %w", sig, p.name, err)
	}
	return nil
}

// Kill sends SIGKILL to the process group and waits until the process is reaped.
func (p *Process) Kill(ctx context.Context) error {
	exited := p.Exited()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("supervisor: %s not reaped after SIGKILL: %w (%s)", p.name, ctx.Err(), NotReapedWhy(p.PID()))
	}
}

// Stop ends the process: SIGTERM to its group (and SIGCONT, so a paused process can
// handle it), then SIGKILL after the stop timeout or when ctx ends. It returns once
// the process is reaped, or with an error wrapping ErrNotReaped when it is not the reap
// timeout after SIGKILL: a tool that proves servers never hang must not hang on a process
// stuck in the kernel. Stopping a process that has ended is a no-op.
func (p *Process) Stop(ctx context.Context) error {
	p.mu.Lock()
	pid, exited := p.pid, p.exited
	p.expected = true
	p.mu.Unlock()
	select {
	case <-exited:
		p.wg.Wait()
		return nil
	default:
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	_ = syscall.Kill(-pid, syscall.SIGCONT)
	tm := time.NewTimer(p.cfg.stopTimeout)
	defer tm.Stop()
	select {
	case <-exited:
	case <-tm.C:
		p.log.Warn("supervisor: process ignored SIGTERM, killing", "name", p.name, "pid", pid)
	case <-ctx.Done():
	}
	// The group too: whatever the leader forked must not outlive it.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	reap := time.NewTimer(p.cfg.reapTimeout)
	defer reap.Stop()
	select {
	case <-exited:
	case <-reap.C:
		why := NotReapedWhy(pid)
		p.log.Error("supervisor: process not reaped after SIGKILL", "name", p.name, "pid", pid, "waited", p.cfg.reapTimeout, "why", why)
		return fmt.Errorf("%w: %s (pid %d), %v after SIGKILL: %s", ErrNotReaped, p.name, pid, p.cfg.reapTimeout, why)
	}
	p.wg.Wait()
	return nil
}

// Restart stops the process if it runs, waits for the restart limiter, starts the
// same argv again and waits for health. A health URL that still answers once the group
// is stopped fails it with ErrOutlived: the new run's health wait would otherwise be
// answered by the old server, and the restart look done while nothing restarted.
func (p *Process) Restart(ctx context.Context) error {
	if err := p.Stop(ctx); err != nil {
		return err
	}
	if p.cfg.healthURL != "" {
		// One look, bounded: a refused connection is the expected answer.
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		status, err := p.get(cctx)
		cancel()
		if err == nil {
			return fmt.Errorf("%w: %s stopped, but %s still answers (status %d)", ErrOutlived, p.name, p.cfg.healthURL, status)
		}
	}
	if err := p.lim.Wait(ctx); err != nil {
		return fmt.Errorf("supervisor: restart %s: %w", p.name, err)
	}
	p.mu.Lock()
	p.restarts++
	p.mu.Unlock()
	if err := p.run(); err != nil {
		return err
	}
	return p.WaitHealthy(ctx)
}
