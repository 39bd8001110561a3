package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var fakepd string // path of the built testdata/fakepd

var quiet = slog.New(slog.DiscardHandler)

func TestMain(m *testing.M) {
	if os.Getenv("LAUNCHER_TEST_PARENT") != "" {
		parentMain()
		return
	}
	dir, err := os.MkdirTemp("", "launcher-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakepd = filepath.Join(dir, "fakepd")
	if out, err := exec.Command("go", "build", "-o", fakepd, "./testdata/fakepd").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build fakepd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// parentMain is a launcher in a child test process, for the orphan test: it starts a
// topology, prints its PIDs and waits to be killed.
func parentMain() {
	t, err := Start(context.Background(), Config{Command: []string{os.Getenv("LAUNCHER_TEST_PARENT")}, Prefill: 1, Decode: 1,
		LogDir: os.Getenv("LAUNCHER_TEST_LOGS"), HealthTimeout: 20 * time.Second})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	for _, p := range t.Processes() {
		fmt.Println("PID", p.PID)
	}
	fmt.Println("READY")
	select {}
}

var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func argsOf(t *testing.T, url string) []string {
	t.Helper()
	resp, err := client.Get(url + "/args")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Args []string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Args
}

// alive reports whether pid runs; a zombie (dead, not yet reaped by whoever adopted it)
// counts as dead.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
		return false
	}
	return true
}

func start(t *testing.T, cfg Config) *Topology {
	t.Helper()
	cfg.Command = []string{fakepd}
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	if cfg.HealthTimeout == 0 {
		cfg.HealthTimeout = 20 * time.Second
	}
	cfg.Logger = quiet
	topo, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topo.Stop(context.Background()) })
	return topo
}

func TestStartStop(t *testing.T) {
	topo := start(t, Config{Prefill: 2, Decode: 1, CommonArgs: []string{"--seed", "3"},
		PrefillArgs: []string{"--p"}, DecodeArgs: []string{"--d"}, RouterArgs: []string{"--r"}})
	procs := topo.Processes()
	var names []string
	for _, p := range procs {
		names = append(names, p.Name+"/"+p.Role)
		if !p.Running || p.PID == 0 || !alive(p.PID) {
			t.Fatalf("%s not running: %+v", p.Name, p)
		}
	}
	if got := strings.Join(names, " "); got != "prefill-0/prefill prefill-1/prefill decode-0/decode router/router" {
		t.Fatalf("processes %s", got)
	}
	rargs := argsOf(t, topo.RouterURL)
	for _, want := range []string{"--r", "--prefill", procs[0].URL, "--prefill-bootstrap", procs[0].BootstrapAddr, procs[1].URL, "--decode", procs[2].URL} {
		if !slices.Contains(rargs, want) {
			t.Fatalf("router args %v lack %q", rargs, want)
		}
	}
	pargs := argsOf(t, procs[0].URL)
	if pargs[0] != "prefill" || !slices.Contains(pargs, "--p") || !slices.Contains(pargs, "3") || slices.Contains(pargs, "--d") {
		t.Fatalf("prefill args %v", pargs)
	}
	if err := topo.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range topo.Processes() {
		if p.Running || alive(p.PID) {
			t.Fatalf("%s still alive after Stop", p.Name)
		}
		if b, _ := os.ReadFile(p.LogPath); !strings.Contains(string(b), "fakepd: serving") {
			t.Fatalf("%s log %q", p.Name, b)
		}
	}
}

func TestLinks(t *testing.T) {
	var asked []string
	topo := start(t, Config{Prefill: 1, Decode: 1, Links: func(link, upstream string) (string, error) {
		asked = append(asked, link)
		if link == "prefill-0->decode-0" {
			return "127.0.0.1:1", nil // a proxy would listen here
		}
		return upstream, nil
	}})
	if got := strings.Join(asked, ","); got != "router->prefill-0,prefill-0->decode-0,router->decode-0" {
		t.Fatalf("links asked %s", got)
	}
	rargs := argsOf(t, topo.RouterURL)
	if i := slices.Index(rargs, "--kv-link"); i < 0 || rargs[i+1] != "0:0=127.0.0.1:1" {
		t.Fatalf("router args %v", rargs)
	}
	_, err := Start(context.Background(), Config{Command: []string{fakepd}, Prefill: 1, Decode: 1, LogDir: t.TempDir(),
		Links: func(string, string) (string, error) { return "", errors.New("no proxy") }})
	if err == nil || !strings.Contains(err.Error(), "no proxy") {
		t.Fatalf("Links error not returned: %v", err)
	}
}

func TestUnexpectedExitAndRestart(t *testing.T) {
	var exits atomic.Int32
	exited := make(chan Process, 1)
	topo := start(t, Config{Prefill: 1, Decode: 1, OnExit: func(p Process) { exits.Add(1); exited <- p }})
	d, err := topo.Process("decode-0")
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(d.PID, syscall.SIGKILL) // behind the launcher's back, like a crash
	select {
	case p := <-exited:
		if p.Name != "decode-0" || p.Exit != "signal: killed" {
			t.Fatalf("exit %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("crash not noticed")
	}
	if now, _ := topo.Process("decode-0"); now.Running {
		t.Fatal("crashed process still shown running")
	}
	if err := topo.Restart(context.Background(), "decode-0"); err != nil {
		t.Fatal(err)
	}
	now, _ := topo.Process("decode-0")
	if !now.Running || now.PID == d.PID || now.URL != d.URL || now.Restarts != 1 {
		t.Fatalf("after restart %+v (before %+v)", now, d)
	}
	if err := topo.Kill("decode-0"); err != nil {
		t.Fatal(err)
	}
	if err := topo.Signal("decode-0", syscall.SIGCONT); err == nil {
		t.Fatal("signal to a dead process succeeded")
	}
	if exits.Load() != 1 {
		t.Fatalf("OnExit called %d times; a requested kill is not unexpected", exits.Load())
	}
	if _, err := topo.Process("nope"); err == nil {
		t.Fatal("unknown process found")
	}
}

func TestStartFailure(t *testing.T) {
	_, err := Start(context.Background(), Config{Command: []string{fakepd}, Prefill: 1, Decode: 2, LogDir: t.TempDir(),
		Env: []string{"FAKEPD_EXIT=decode"}, HealthTimeout: 20 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "decode-0 exited before it was healthy") || !strings.Contains(err.Error(), "told to fail") {
		t.Fatalf("got %v", err)
	}
	for _, c := range []Config{{Prefill: 0, Decode: 1}, {Prefill: 1, Decode: 0}} {
		c.Command = []string{fakepd}
		if _, err := Start(context.Background(), c); err == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
	if _, err := Start(context.Background(), Config{Prefill: 1, Decode: 1}); err == nil {
		t.Fatal("empty command accepted")
	}
}

func TestPortTakenRetried(t *testing.T) {
	topo := start(t, Config{Prefill: 1, Decode: 1, Env: []string{"FAKEPD_CLASH_ONCE=" + filepath.Join(t.TempDir(), "clashed")}})
	d, err := topo.Process("decode-0")
	if err != nil || !d.Running {
		t.Fatalf("%+v %v", d, err)
	}
	b, _ := os.ReadFile(d.LogPath)
	if !strings.Contains(string(b), "address already in use") || !strings.Contains(string(b), "fakepd: serving") {
		t.Fatalf("decode log %s", b)
	}
	if rargs := argsOf(t, topo.RouterURL); !slices.Contains(rargs, d.URL) {
		t.Fatalf("router args %v lack the decode's new URL %s", rargs, d.URL)
	}
}

func TestStopEndsPausedProcess(t *testing.T) {
	topo := start(t, Config{Prefill: 1, Decode: 1, StopTimeout: 20 * time.Second})
	if err := topo.Signal("decode-0", syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := topo.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, _ := topo.Process("decode-0")
	if d.Running || d.Exit != "exit status 0" || time.Since(start) > 15*time.Second {
		t.Fatalf("paused decode: %+v after %s", d, time.Since(start))
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	topo := start(t, Config{Prefill: 1, Decode: 1, Env: []string{"FAKEPD_IGNORE_TERM=1"}, StopTimeout: 200 * time.Millisecond})
	if err := topo.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range topo.Processes() {
		if p.Running || alive(p.PID) || p.Exit != "signal: killed" {
			t.Fatalf("%+v", p)
		}
	}
}

// TestNoOrphans kills the launcher's own process with SIGKILL and checks that every child
// goes with it (Pdeathsig).
func TestNoOrphans(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LAUNCHER_TEST_PARENT="+fakepd, "LAUNCHER_TEST_LOGS="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if pid, ok := strings.CutPrefix(line, "PID "); ok {
			n, _ := strconv.Atoi(pid)
			pids = append(pids, n)
		}
		if line == "READY" || strings.HasPrefix(line, "ERR") {
			break
		}
	}
	if len(pids) != 3 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("parent started %v", pids)
	}
	cmd.Process.Kill()
	cmd.Wait()
	for _, pid := range pids {
		gone := false
		for i := 0; i < 500 && !gone; i++ {
			// The children are reparented to init (or a subreaper), which reaps them.
			gone = !alive(pid)
			if !gone {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if !gone {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d outlived its launcher", pid)
		}
	}
}
