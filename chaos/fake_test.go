package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/chaos/netproxy"
	"pdsoak/ledger"
	"pdsoak/server/failpoint"
)

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		serveForTest() // the test binary re-executed as a child HTTP server (server_test.go)
		return
	}
	goleak.VerifyTestMain(m)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeEnv is a hand-written Env. Processes are real children (sleep) when a test needs
// them; failpoints are real registries behind the real admin handler on loopback; links
// are real netproxy links in front of a loopback echo server.
type fakeEnv struct {
	t *testing.T

	mu        sync.Mutex
	members   map[string][]string
	procs     map[string]*fakeProc
	registry  map[string]*failpoint.Registry
	adminURL  map[string]string
	links     *netproxy.Links
	loads     []*fakeRun
	scrape    map[string]map[string]float64
	events    []ledger.Event
	restarts  int
	signalErr error
}

type fakeProc struct {
	name, role string
	cmd        *exec.Cmd
	done       chan struct{}
}

func newFakeEnv(t *testing.T) *fakeEnv {
	return &fakeEnv{t: t, members: map[string][]string{}, procs: map[string]*fakeProc{},
		registry: map[string]*failpoint.Registry{}, adminURL: map[string]string{}, scrape: map[string]map[string]float64{}}
}

func (e *fakeEnv) Members(target string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m, ok := e.members[target]; ok {
		return m
	}
	if _, ok := e.procs[target]; ok {
		return []string{target}
	}
	if _, ok := e.registry[target]; ok {
		return []string{target}
	}
	if e.links != nil {
		if _, err := e.links.Link(target); err == nil {
			return []string{target}
		}
	}
	if target == "client" {
		return []string{"client"}
	}
	return nil
}

// startProc starts a real `sleep 30` child, reaped by a goroutine, killed at cleanup.
func (e *fakeEnv) startProc(name, role string) *fakeProc {
	e.t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &fakeProc{name: name, role: role, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.done
	})
	e.mu.Lock()
	e.procs[name] = p
	e.mu.Unlock()
	return p
}

func (e *fakeEnv) Process(name string) (Process, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.procs[name]
	if !ok {
		if _, ok := e.registry[name]; ok {
			return Process{}, fmt.Errorf("%w: fake has no process %s", ErrUnsupported, name)
		}
		return Process{}, fmt.Errorf("fake: no process %q", name)
	}
	return Process{Name: name, Role: p.role, PID: p.cmd.Process.Pid}, nil
}

func (e *fakeEnv) Signal(name string, sig syscall.Signal) error {
	if e.signalErr != nil {
		return e.signalErr
	}
	p, err := e.Process(name)
	if err != nil {
		return err
	}
	return syscall.Kill(p.PID, sig)
}

func (e *fakeEnv) Restart(_ context.Context, name string) error {
	e.mu.Lock()
	old := e.procs[name]
	e.restarts++
	e.mu.Unlock()
	if old == nil {
		return fmt.Errorf("fake: no process %q", name)
	}
	_ = old.cmd.Process.Kill()
	<-old.done
	e.startProc(name, old.role)
	return nil
}

// addFailpoints serves a real registry for process name over loopback.
func (e *fakeEnv) addFailpoints(name, role string) *failpoint.Registry {
	e.t.Helper()
	r := failpoint.NewRegistry(failpoint.WithLogger(quietLogger()))
	mux := http.NewServeMux()
	mux.Handle("/admin/", r.AdminHandler("tok"))
	srv := httptest.NewServer(mux)
	e.t.Cleanup(func() { r.DisableAll(); srv.Close() })
	e.mu.Lock()
	e.registry[name] = r
	e.adminURL[name] = srv.URL
	e.mu.Unlock()
	_ = role
	return r
}

func (e *fakeEnv) Failpoints(process string) (Failpoints, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	u, ok := e.adminURL[process]
	if !ok {
		return nil, fmt.Errorf("%w: no admin API on %s", ErrUnsupported, process)
	}
	c := failpoint.NewClient(u, "tok")
	c.HTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return c, nil
}

func (e *fakeEnv) Link(name string) (Link, error) {
	if e.links == nil {
		return nil, fmt.Errorf("%w: no proxies", ErrUnsupported)
	}
	return LinksFrom(e.links)(name)
}

// fakeRun is a Run whose stats the test sets.
type fakeRun struct {
	target  string
	burst   Burst
	disc    Disconnect
	stats   atomic.Pointer[RunStats]
	stopped atomic.Bool
}

func (r *fakeRun) Stats() RunStats {
	if s := r.stats.Load(); s != nil {
		return *s
	}
	return RunStats{}
}
func (r *fakeRun) Stop()          { r.stopped.Store(true) }
func (r *fakeRun) set(s RunStats) { r.stats.Store(&s) }

func (e *fakeEnv) Load(_ context.Context, target string, b Burst) (Run, error) {
	r := &fakeRun{target: target, burst: b}
	e.mu.Lock()
	e.loads = append(e.loads, r)
	e.mu.Unlock()
	return r, nil
}

func (e *fakeEnv) Disconnect(_ context.Context, target string, d Disconnect) (Run, error) {
	r := &fakeRun{target: target, disc: d}
	e.mu.Lock()
	e.loads = append(e.loads, r)
	e.mu.Unlock()
	return r, nil
}

func (e *fakeEnv) lastRun() *fakeRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.loads) == 0 {
		return nil
	}
	return e.loads[len(e.loads)-1]
}

func (e *fakeEnv) Scrape(_ context.Context, process string) (map[string]float64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m, ok := e.scrape[process]
	if !ok {
		return nil, fmt.Errorf("%w: no metrics for %s", ErrUnsupported, process)
	}
	return m, nil
}

func (e *fakeEnv) Emit(ev ledger.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

// eventLog renders the events as "type:fault[:passed]" for comparisons.
func (e *fakeEnv) eventLog() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.events {
		s := string(ev.Type) + ":" + ev.Fault
		if ev.Passed != nil {
			s += fmt.Sprintf(":%v", *ev.Passed)
		}
		out = append(out, s)
	}
	return out
}

// echo is a loopback echo server for link tests.
type echo struct {
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	cs     []net.Conn
	closed bool // set by cleanup: a connection accepted after it is closed at once
}

func newEchoServer(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &echo{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Accept may return a connection after cleanup closed the others: close
			// it too, or its copy (and cleanup's Wait) would last as long as the peer
			// keeps it open.
			e.mu.Lock()
			if e.closed {
				e.mu.Unlock()
				c.Close()
				continue
			}
			e.cs = append(e.cs, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() { defer e.wg.Done(); _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		e.closed = true
		for _, c := range e.cs {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// withLinks gives the env real proxies named names in front of one echo server.
func (e *fakeEnv) withLinks(names ...string) {
	e.t.Helper()
	srv := newEchoServer(e.t)
	l := netproxy.New()
	e.t.Cleanup(func() { _ = l.Close() })
	for _, n := range names {
		if _, err := l.Add(n, srv.ln.Addr().String()); err != nil {
			e.t.Fatal(err)
		}
	}
	e.links = l
}

// traffic sends one line through a link and reads the whole echo back, bounded by
// waitBound (errors are returned, not fatal, since toxics may cut the connection).
// Reading all of it matters: a connection closed while a toxic still holds some of its
// bytes can deadlock toxiproxy's RemoveToxic (Shopify/toxiproxy#558: the toxic blocks
// sending to a link writer that waits for the lock RemoveToxic holds), so the fault's
// Revert would hang. Every toxic these tests apply delivers or cuts within the bound.
func (e *fakeEnv) traffic(link string) error {
	k, err := e.links.Link(link)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", k.Addr(), waitBound)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitBound))
	msg := "ping\n"
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, len(msg)))
	return err
}
