package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
	"pdsoak/supervisor"
)

// serveEnv makes the test binary, re-executed, an HTTP server (TestMain).
const serveEnv = "PDSOAK_CHAOS_TEST_SERVE"

// serveForTest serves HTTP on a loopback port after printing "PID ADDR", until killed
// (or a minute, should a test die without its cleanup).
func serveForTest() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("%d %s\n", os.Getpid(), ln.Addr())
	time.AfterFunc(time.Minute, func() { os.Exit(3) })
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	os.Exit(1)
}

// wrapped is a server launched through a wrapper, as `uv run` or a launch script does:
// `sh -c '"$0" & wait'` (pid wrapper) whose child (pid server) serves url.
type wrapped struct {
	wrapper, server int
	url             string
}

// startWrapped starts a wrapped server in its own process group, which cleanup kills
// (SIGCONT first, so a stopped member dies too).
func startWrapped(t *testing.T) wrapped {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", `"$0" & wait`, exe)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGCONT)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("wrapper pid %d not reaped", pgid)
		}
	})
	line := make(chan string, 1)
	go func() { s, _ := bufio.NewReader(out).ReadString('\n'); line <- s }()
	var first string
	select {
	case first = <-line:
	case <-time.After(10 * time.Second):
	}
	// Wait only after the read: it closes the pipe.
	go func() { _ = cmd.Wait(); close(done) }()
	f := strings.Fields(first)
	require.Len(t, f, 2, "server's first line %q", first)
	pid, err := strconv.Atoi(f[0])
	require.NoError(t, err)
	w := wrapped{wrapper: pgid, server: pid, url: "http://" + f[1]}
	require.NotEqual(t, w.wrapper, w.server)
	require.NoError(t, ProbeServer(context.Background(), Process{Name: "server", URL: w.url}, 5*time.Second), "server answers")
	return w
}

// pidEnv is an Env over real pids: Process describes them by name, Signal signals the
// pid; server probes and states are the real ones (FuncEnv's defaults).
func pidEnv(procs ...Process) *FuncEnv {
	byName := map[string]Process{}
	for _, p := range procs {
		byName[p.Name] = p
	}
	return &FuncEnv{
		ProcessFunc: func(name string) (Process, error) {
			p, ok := byName[name]
			if !ok {
				return Process{}, fmt.Errorf("test: no process %q", name)
			}
			return p, nil
		},
		SignalFunc: func(name string, sig syscall.Signal) error { return syscall.Kill(byName[name].PID, sig) },
	}
}

// waitPid waits (bounded) until cond holds for pid's state.
func waitPid(t *testing.T, pid int, cond func(st supervisor.State, gone bool) bool) {
	t.Helper()
	require.NoError(t, waitState(context.Background(), nil, pid, cond))
}

// TestKillProofNeedsTheServerGone: a kill is proved by the signalled pid gone and its
// server no longer answering. SIGKILL to a wrapper whose child serves leaves the server
// up: no proof. SIGKILL to the server itself: proved, the port refusing connections.
func TestKillProofNeedsTheServerGone(t *testing.T) {
	w := startWrapped(t)
	ctx := context.Background()
	env := pidEnv(Process{Name: "wrapper", Role: "decode", PID: w.wrapper, URL: w.url},
		Process{Name: "server", Role: "decode", PID: w.server, URL: w.url})

	t.Run("wrapper killed, its child still serving", func(t *testing.T) {
		f, err := New(spec("decode_crash", "wrapper", map[string]any{"restart": false}))
		require.NoError(t, err)
		require.NoError(t, f.Apply(ctx, env))
		waitPid(t, w.wrapper, func(_ supervisor.State, gone bool) bool { return gone })
		err = f.Verify(ctx, env)
		require.Error(t, err, "Verify passed although %s still answers", w.url)
		assert.Contains(t, err.Error(), w.url+" still answers")
		require.NoError(t, f.Revert(ctx, env))
	})
	t.Run("server killed", func(t *testing.T) {
		f := applyAndVerify(t, spec("decode_crash", "server", map[string]any{"restart": false}), env)
		ev := f.(Evidencer).Evidence()
		assert.Contains(t, ev, fmt.Sprintf("server: pid %d ", w.server))
		// Refused, or reset when the probe came while the other threads of a zombie
		// leader still held the listener: either way no answer.
		assert.Regexp(t, regexp.QuoteMeta(w.url)+" (refuses connections|closes connections without a response)", ev)
		require.NoError(t, f.Revert(ctx, env))
	})
	t.Run("a URL that answered nothing before: /proc alone, and the evidence says so", func(t *testing.T) {
		// A wrong port in health_url refuses before the kill and after: the refusal
		// proves nothing about the kill, so it is not offered as proof.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		dead := "http://" + ln.Addr().String()
		require.NoError(t, ln.Close())
		w2 := startWrapped(t)
		env := pidEnv(Process{Name: "server", Role: "decode", PID: w2.server, URL: dead})
		f := applyAndVerify(t, spec("decode_crash", "server", map[string]any{"restart": false}), env)
		ev := f.(Evidencer).Evidence()
		assert.Contains(t, ev, "server not probed ("+dead+" gave no answer before the signal)")
		assert.NotContains(t, ev, "refuses connections")
	})
	t.Run("no URL: /proc alone, and the evidence says so", func(t *testing.T) {
		e := newFakeEnv(t)
		e.startProc("router", "router")
		f := applyAndVerify(t, spec("process_kill", "router", map[string]any{"restart": false}), e)
		assert.Contains(t, f.(Evidencer).Evidence(), "server not probed (no URL)")
	})
}

// TestPauseProofNeedsTheServerSilent: a pause is proved by state T and the server
// silent. SIGSTOP to a wrapper leaves its child answering: no proof. SIGSTOP to the
// server: its kernel still accepts the connection, but no response comes: proved; after
// the revert it answers again.
func TestPauseProofNeedsTheServerSilent(t *testing.T) {
	w := startWrapped(t)
	ctx := context.Background()
	env := pidEnv(Process{Name: "wrapper", Role: "decode", PID: w.wrapper, URL: w.url},
		Process{Name: "server", Role: "decode", PID: w.server, URL: w.url})
	stopped := func(st supervisor.State, gone bool) bool { return !gone && stoppedState(st) }

	t.Run("wrapper stopped, its child still serving", func(t *testing.T) {
		f, err := New(spec("process_pause", "wrapper", nil))
		require.NoError(t, err)
		require.NoError(t, f.Apply(ctx, env))
		waitPid(t, w.wrapper, stopped)
		err = f.Verify(ctx, env)
		require.Error(t, err, "Verify passed although %s still answers", w.url)
		assert.Contains(t, err.Error(), w.url+" still answers")
		require.NoError(t, f.Revert(ctx, env))
	})
	t.Run("server stopped", func(t *testing.T) {
		f, err := New(spec("process_pause", "server", nil))
		require.NoError(t, err)
		require.NoError(t, f.Apply(ctx, env))
		waitPid(t, w.server, stopped)
		require.NoError(t, f.Verify(ctx, env))
		ev := f.(Evidencer).Evidence()
		assert.Contains(t, ev, fmt.Sprintf("server: pid %d in state T", w.server))
		assert.Contains(t, ev, w.url+" gives no response within")
		require.NoError(t, f.Revert(ctx, env))
		assert.NoError(t, ProbeServer(ctx, Process{Name: "server", URL: w.url}, 5*time.Second), "answers after the revert")
	})
	t.Run("a pause shorter than the probe", func(t *testing.T) {
		// process_pause for 1s gives Verify less than ServerProbeTimeout: the probe ends
		// before the Verify's deadline and its silence is the proof. It outlived the
		// deadline before, and the fault could never be proved.
		f, err := New(spec("process_pause", "server", nil))
		require.NoError(t, err)
		require.NoError(t, f.Apply(ctx, env))
		waitPid(t, w.server, stopped)
		vctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
		defer cancel()
		require.NoError(t, f.Verify(vctx, env))
		assert.Regexp(t, regexp.QuoteMeta(w.url)+` gives no response within [2-6]\d\dms`, f.(Evidencer).Evidence())
		require.NoError(t, f.Revert(ctx, env))
	})
}

// TestProbeServer: an answer (any status) is nil; a closed port is ErrRefused; a
// listener that never accepts (the kernel queues the connection) is ErrNoResponse;
// a URL that cannot be probed is neither.
func TestProbeServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedURL := "http://" + closed.Addr().String()
	require.NoError(t, closed.Close())
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })

	tests := []struct {
		name string
		url  string
		want error // nil with none: an answer
		none bool  // an error wrapping neither sentinel
	}{
		{name: "answers 404", url: srv.URL},
		{name: "refused", url: closedURL, want: ErrRefused},
		{name: "silent", url: "http://" + silent.Addr().String(), want: ErrNoResponse},
		{name: "no URL", url: "", none: true},
		{name: "not http", url: "sim://decode-0", none: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ProbeServer(context.Background(), Process{Name: "p", URL: tt.url}, 200*time.Millisecond)
			switch {
			case tt.none:
				require.Error(t, err)
				assert.False(t, errors.Is(err, ErrRefused) || errors.Is(err, ErrNoResponse), "%v", err)
			case tt.want != nil:
				require.ErrorIs(t, err, tt.want)
			default:
				require.NoError(t, err)
			}
		})
	}
}

// applyAndVerify applies the fault sp on env and polls Verify until it passes, as the
// timeline does (bounded).
func applyAndVerify(t *testing.T, sp scenarios.Fault, env Env) Fault {
	t.Helper()
	f, err := New(sp)
	require.NoError(t, err)
	require.NoError(t, f.Apply(context.Background(), env))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, f.Verify(context.Background(), env))
	}, 10*time.Second, 20*time.Millisecond)
	return f
}
