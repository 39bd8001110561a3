package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/supervisor"
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
		LogDir: os.Getenv("LAUNCHER_TEST_LOGS"), HealthTimeout: time.Minute})
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
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct{ Args []string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Args
}

// alive reports whether pid runs; a zombie (dead, not yet reaped by whoever adopted it)
// counts as dead.
func alive(pid int) bool {
	st, err := supervisor.ReadState(pid)
	return err == nil && st != supervisor.StateGone && st != supervisor.StateZombie
}

func start(t *testing.T, cfg Config) *Topology {
	t.Helper()
	cfg.Command = []string{fakepd}
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	if cfg.HealthTimeout == 0 {
		cfg.HealthTimeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	topo, err := Start(context.Background(), cfg)
	require.NoError(t, err)
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
		assert.True(t, p.Running && p.PID != 0 && alive(p.PID), "%s not running: %+v", p.Name, p)
	}
	assert.Equal(t, []string{"prefill-0/prefill", "prefill-1/prefill", "decode-0/decode", "router/router"}, names)
	rargs := argsOf(t, topo.RouterURL)
	for _, want := range []string{"--r", "--prefill", procs[0].URL, "--prefill-bootstrap", procs[0].BootstrapAddr, procs[1].URL, "--decode", procs[2].URL} {
		assert.Contains(t, rargs, want)
	}
	pargs := argsOf(t, procs[0].URL)
	assert.Equal(t, "prefill", pargs[0])
	assert.Subset(t, pargs, []string{"--p", "3"})
	assert.NotContains(t, pargs, "--d")
	require.NoError(t, topo.Stop(context.Background()))
	for _, p := range topo.Processes() {
		assert.False(t, p.Running || alive(p.PID), "%s still alive after Stop", p.Name)
		b, err := os.ReadFile(p.LogPath)
		require.NoError(t, err)
		assert.Contains(t, string(b), "fakepd: serving", p.Name)
	}
}

// The fault-injection token is in every process's environment only: not in any argv
// (/proc/PID/cmdline is what ps shows every local user), not in any log.
func TestFaultTokenNotInArgvOrLogs(t *testing.T) {
	const token = "f4ult-t0ken-5ecret"
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	topo := start(t, Config{Prefill: 1, Decode: 1, FaultToken: token, CommonArgs: []string{"--enable-fault-injection"}, Logger: logger})
	for _, p := range topo.Processes() {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		require.NoError(t, err)
		assert.NotContains(t, string(cmdline), token, p.Name)
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
		require.NoError(t, err)
		assert.True(t, bytes.Contains(environ, []byte(FaultTokenEnv+"="+token)),
			"%s: every process, the router included (its admin API serves api/health), gets the token in its environment", p.Name)
	}
	require.NoError(t, topo.Restart(context.Background(), "decode-0"))
	require.NoError(t, topo.Stop(context.Background()))
	mu.Lock()
	assert.NotEmpty(t, logs.String())
	assert.NotContains(t, logs.String(), token)
	mu.Unlock()
	entries, err := os.ReadDir(topo.LogDir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(topo.LogDir, e.Name()))
		require.NoError(t, err)
		assert.NotContains(t, string(b), token, e.Name())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
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
	assert.Equal(t, []string{"router->prefill-0", "prefill-0->decode-0", "router->decode-0"}, asked)
	rargs := argsOf(t, topo.RouterURL)
	i := slices.Index(rargs, "--kv-link")
	require.GreaterOrEqual(t, i, 0, "router args %v", rargs)
	assert.Equal(t, "0:0=127.0.0.1:1", rargs[i+1])
	_, err := Start(context.Background(), Config{Command: []string{fakepd}, Prefill: 1, Decode: 1, LogDir: t.TempDir(),
		Links: func(string, string) (string, error) { return "", errors.New("no proxy") }, Logger: quiet})
	require.ErrorContains(t, err, "no proxy")
}

func TestUnexpectedExitAndRestart(t *testing.T) {
	var exits atomic.Int32
	exited := make(chan Process, 1)
	topo := start(t, Config{Prefill: 1, Decode: 1, OnExit: func(p Process) { exits.Add(1); exited <- p }})
	d, err := topo.Process("decode-0")
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(d.PID, syscall.SIGKILL)) // behind the launcher's back, like a crash
	p := <-exited
	assert.Equal(t, "decode-0", p.Name)
	assert.Equal(t, "signal: killed", p.Exit)
	now, err := topo.Process("decode-0")
	require.NoError(t, err)
	assert.False(t, now.Running, "crashed process still shown running")
	require.NoError(t, topo.Restart(context.Background(), "decode-0"))
	now, err = topo.Process("decode-0")
	require.NoError(t, err)
	assert.True(t, now.Running)
	assert.NotEqual(t, d.PID, now.PID)
	assert.Equal(t, d.URL, now.URL, "restarted on the same port")
	assert.Equal(t, 1, now.Restarts)
	require.NoError(t, topo.Kill("decode-0"))
	assert.Error(t, topo.Signal("decode-0", syscall.SIGCONT), "signal to a dead process")
	assert.EqualValues(t, 1, exits.Load(), "a requested kill is not unexpected")
	_, err = topo.Process("nope")
	assert.Error(t, err)
}

func TestStartFailure(t *testing.T) {
	_, err := Start(context.Background(), Config{Command: []string{fakepd}, Prefill: 1, Decode: 2, LogDir: t.TempDir(),
		Env: []string{"FAKEPD_EXIT=decode"}, HealthTimeout: time.Minute, Logger: quiet})
	require.ErrorContains(t, err, "decode-0 exited before it was healthy")
	assert.ErrorContains(t, err, "told to fail")
	assert.ErrorIs(t, err, supervisor.ErrExited)
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "no prefill", cfg: Config{Command: []string{fakepd}, Prefill: 0, Decode: 1}},
		{name: "no decode", cfg: Config{Command: []string{fakepd}, Prefill: 1, Decode: 0}},
		{name: "empty command", cfg: Config{Prefill: 1, Decode: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Start(context.Background(), tt.cfg)
			assert.Error(t, err)
		})
	}
}

func TestPortTakenRetried(t *testing.T) {
	topo := start(t, Config{Prefill: 1, Decode: 1, Env: []string{"FAKEPD_CLASH_ONCE=" + filepath.Join(t.TempDir(), "clashed")}})
	d, err := topo.Process("decode-0")
	require.NoError(t, err)
	assert.True(t, d.Running)
	b, err := os.ReadFile(d.LogPath)
	require.NoError(t, err)
	assert.Contains(t, string(b), "address already in use")
	assert.Contains(t, string(b), "fakepd: serving")
	assert.Contains(t, argsOf(t, topo.RouterURL), d.URL, "the router has the decode's new URL")
}

func TestStop(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		pause string
		exit  map[string]string
	}{
		{name: "paused process gets SIGCONT and exits on SIGTERM", pause: "decode-0",
			cfg:  Config{Prefill: 1, Decode: 1, StopTimeout: time.Hour},
			exit: map[string]string{"prefill-0": "exit status 0", "decode-0": "exit status 0", "router": "exit status 0"}},
		{name: "SIGTERM ignored: SIGKILL after the bound",
			cfg:  Config{Prefill: 1, Decode: 1, Env: []string{"FAKEPD_IGNORE_TERM=1"}, StopTimeout: 200 * time.Millisecond},
			exit: map[string]string{"prefill-0": "signal: killed", "decode-0": "signal: killed", "router": "signal: killed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := start(t, tt.cfg)
			if tt.pause != "" {
				require.NoError(t, topo.Signal(tt.pause, syscall.SIGSTOP))
				sp, err := topo.Supervised(tt.pause)
				require.NoError(t, err)
				require.Eventually(t, func() bool { st, _ := sp.State(); return st == supervisor.StateStopped }, time.Minute, 10*time.Millisecond)
			}
			require.NoError(t, topo.Stop(context.Background()))
			got := map[string]string{}
			for _, p := range topo.Processes() {
				assert.False(t, p.Running || alive(p.PID), p.Name)
				got[p.Name] = p.Exit
			}
			assert.Equal(t, tt.exit, got)
		})
	}
}

// TestNoOrphans kills the launcher's own process with SIGKILL and checks that every child
// goes with it (Pdeathsig).
func TestNoOrphans(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LAUNCHER_TEST_PARENT="+fakepd, "LAUNCHER_TEST_LOGS="+t.TempDir())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
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
	cmd.Process.Kill()
	cmd.Wait()
	require.Len(t, pids, 3, "parent started %v", pids)
	for _, pid := range pids {
		// The children are reparented to init (or a subreaper), which reaps them.
		if !assert.Eventually(t, func() bool { return !alive(pid) }, time.Minute, 10*time.Millisecond, "child %d outlived its launcher", pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
