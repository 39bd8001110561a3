package supervisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"pdsoak/internal/testutil"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// ptraceSeize is PTRACE_SEIZE (linux/ptrace.h), which package syscall does not name.
const ptraceSeize = 0x4206

// childEnv makes the test binary a fake child process (see childMain).
const childEnv = "SUPERVISOR_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		childMain(mode, os.Args[1:])
		return
	}
	goleak.VerifyTestMain(m)
}

// childMain is the fake process: "serve PORT" answers /health; "ignore-term PORT" too,
// ignoring SIGTERM; "idle" does nothing; "exit" fails at once; "parent LOG" supervises a "sleep" child and prints its
// pid.
func childMain(mode string, args []string) {
	fmt.Println("child", mode, "started")
	switch mode {
	case "serve":
		ln, err := net.Listen("tcp", "127.0.0.1:"+args[0])
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		http.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
		_ = http.Serve(ln, nil)
	case "ignore-term": // serves /health once SIGTERM is ignored
		signal.Ignore(syscall.SIGTERM)
		ln, err := net.Listen("tcp", "127.0.0.1:"+args[0])
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		http.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
		_ = http.Serve(ln, nil)
	case "idle":
		select {}
	case "exit":
		fmt.Println("fatal: cannot start")
		os.Exit(3)
	case "tracer": // attaches to pid args[0] with PTRACE_SEIZE and never collects it
		runtime.LockOSThread() // ptrace requests belong to the attaching thread
		pid, _ := strconv.Atoi(args[0])
		if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(pid), 0, 0, 0, 0); e != 0 {
			fmt.Println("SEIZE", e)
			os.Exit(1)
		}
		fmt.Println("ATTACHED")
		time.Sleep(time.Minute) // bounded: the test kills it long before
	case "parent":
		p, err := Start("sleeper", []string{"sleep", "1000"}, WithLog(args[0]))
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("PID", p.PID())
		select {}
	}
}

func self(t *testing.T, mode string, args ...string) ([]string, Option) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return append([]string{exe}, args...), WithEnv(childEnv + "=" + mode)
}

func freePort(t *testing.T) int { return testutil.FreePort(t) }

// serve starts a fake server and waits for its health.
func serve(t *testing.T, opts ...Option) *Process { t.Helper(); return serveAs(t, "serve", opts...) }

func serveAs(t *testing.T, mode string, opts ...Option) *Process {
	t.Helper()
	port := freePort(t)
	argv, env := self(t, mode, strconv.Itoa(port))
	opts = append([]Option{env, WithLog(filepath.Join(t.TempDir(), "serve.log")),
		WithHealthURL(fmt.Sprintf("http://127.0.0.1:%d/health", port))}, opts...)
	p, err := Start("serve", argv, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	require.NoError(t, p.WaitHealthy(context.Background()))
	return p
}

func TestStartHealthyStop(t *testing.T) {
	p := serve(t)
	st, err := p.State()
	require.NoError(t, err)
	assert.Equal(t, StateRunning, st)
	assert.True(t, p.Running())
	require.NoError(t, p.Stop(context.Background()))
	assert.False(t, p.Running())
	assert.Equal(t, Exit{PID: p.PID(), Status: "signal: terminated", Expected: true}, p.Exit())
	st, err = p.State()
	require.NoError(t, err)
	assert.Equal(t, StateGone, st)
	out, err := p.RunLog()
	require.NoError(t, err)
	assert.Contains(t, string(out), "child serve started")
	// A second Stop is a no-op.
	require.NoError(t, p.Stop(context.Background()))
}

func TestWaitHealthyFailures(t *testing.T) {
	tests := []struct {
		name      string
		mode      string
		exited    bool
		wantInErr string
		health    time.Duration
	}{
		// The health bound is tight only where its expiry is the expected outcome: a
		// process that exits must be seen exiting, however slowly a loaded machine
		// starts it.
		{name: "exits before healthy", mode: "exit", exited: true, wantInErr: "fatal: cannot start", health: time.Minute},
		{name: "never healthy", mode: "idle", wantInErr: "not healthy", health: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv, env := self(t, tt.mode)
			p, err := Start(tt.mode, argv, env, WithLog(filepath.Join(t.TempDir(), "x.log")),
				WithHealthURL(fmt.Sprintf("http://127.0.0.1:%d/health", freePort(t))),
				WithHealthTimeout(tt.health), WithStopTimeout(time.Second))
			require.NoError(t, err)
			defer p.Stop(context.Background())
			err = p.WaitHealthy(context.Background())
			require.Error(t, err)
			assert.Equal(t, tt.exited, errors.Is(err, ErrExited), err.Error())
			assert.Contains(t, err.Error(), tt.wantInErr)
		})
	}
}

func TestSignalStates(t *testing.T) {
	p := serve(t)
	tests := []struct {
		name string
		sig  syscall.Signal
		want State
	}{
		{name: "SIGSTOP stops", sig: syscall.SIGSTOP, want: StateStopped},
		{name: "SIGCONT resumes", sig: syscall.SIGCONT, want: StateRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, p.Signal(tt.sig))
			require.Eventually(t, func() bool { st, _ := p.State(); return st == tt.want }, time.Minute, 10*time.Millisecond)
		})
	}
}

func TestStop(t *testing.T) {
	tests := []struct {
		name   string
		mode   string
		pause  bool
		bound  time.Duration
		status string
	}{
		// A paused process gets SIGCONT after SIGTERM, so SIGTERM ends it, not SIGKILL.
		{name: "paused process handles SIGTERM", mode: "serve", pause: true, bound: time.Hour, status: "signal: terminated"},
		{name: "SIGTERM ignored: SIGKILL after the bound", mode: "ignore-term", bound: 100 * time.Millisecond, status: "signal: killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := serveAs(t, tt.mode, WithStopTimeout(tt.bound))
			if tt.pause {
				require.NoError(t, p.Signal(syscall.SIGSTOP))
				require.Eventually(t, func() bool { st, _ := p.State(); return st == StateStopped }, time.Minute, 10*time.Millisecond)
			}
			require.NoError(t, p.Stop(context.Background()))
			assert.Equal(t, tt.status, p.Exit().Status)
			assert.True(t, p.Exit().Expected)
		})
	}
}

func TestRestartSameArgv(t *testing.T) {
	p := serve(t)
	pid := p.PID()
	require.NoError(t, p.Restart(context.Background()))
	assert.NotEqual(t, pid, p.PID())
	assert.Equal(t, 1, p.Restarts())
	assert.True(t, p.Running())
	b, err := os.ReadFile(p.LogPath())
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(b), "child serve started"), "the log is appended across restarts")
	out, err := p.RunLog()
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(out), "child serve started"), "RunLog is the current run only")
}

// TestRestartRefusesAServerOutsideTheGroup: `setsid -w` forks the server into a session
// of its own, so stopping the group stops setsid and leaves the server answering. The
// restart's health wait would then be answered by the old server; it fails with
// ErrOutlived instead.
func TestRestartRefusesAServerOutsideTheGroup(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Fatalf("setsid (util-linux) is needed: %v", err)
	}
	port := freePort(t)
	argv, env := self(t, "serve", strconv.Itoa(port))
	t.Cleanup(func() { killCmdline(argv) })
	p, err := Start("detached", append([]string{"setsid", "-w"}, argv...), env,
		WithLog(filepath.Join(t.TempDir(), "serve.log")), WithHealthURL(fmt.Sprintf("http://127.0.0.1:%d/health", port)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	require.NoError(t, p.WaitHealthy(context.Background()))
	err = p.Restart(context.Background())
	require.ErrorIs(t, err, ErrOutlived)
	assert.Contains(t, err.Error(), fmt.Sprintf("http://127.0.0.1:%d/health still answers", port))
}

// killCmdline SIGKILLs the processes whose command line is argv.
func killCmdline(argv []string) {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == want {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestRestartLimited(t *testing.T) {
	p := serve(t, WithRestartLimit(time.Hour, 1))
	require.NoError(t, p.Restart(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Error(t, p.Restart(ctx), "the second restart waits an hour for the limiter")
}

func TestUnexpectedExitReported(t *testing.T) {
	exits := make(chan Exit, 2)
	p := serve(t, WithOnExit(func(_ *Process, e Exit) { exits <- e }))
	require.NoError(t, syscall.Kill(p.PID(), syscall.SIGKILL)) // behind the supervisor's back
	e := <-exits
	assert.Equal(t, Exit{PID: p.PID(), Status: "signal: killed", Expected: false}, e)
	assert.Error(t, p.Signal(syscall.SIGTERM), "an exited process cannot be signalled")

	// Kill through the supervisor is asked for.
	require.NoError(t, p.Restart(context.Background()))
	require.NoError(t, p.Kill(context.Background()))
	assert.Equal(t, Exit{PID: p.PID(), Status: "signal: killed", Expected: true}, <-exits)
}

// Secrets go in the environment: /proc/PID/cmdline (what ps shows) does not hold them.
func TestEnvNotInArgv(t *testing.T) {
	const secret = "s3cret-value"
	p := serve(t, WithEnv("PDSOAK_TEST_SECRET="+secret))
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID()))
	require.NoError(t, err)
	assert.NotContains(t, string(cmdline), secret)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID()))
	require.NoError(t, err)
	assert.Contains(t, string(environ), "PDSOAK_TEST_SECRET="+secret)
}

// A supervised process dies with its supervisor, even when that one is SIGKILLed.
func TestNoOrphans(t *testing.T) {
	argv, _ := self(t, "parent", filepath.Join(t.TempDir(), "sleeper.log"))
	parent := exec.Command(argv[0], argv[1:]...)
	parent.Env = append(os.Environ(), childEnv+"=parent")
	out, err := parent.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, parent.Start())
	sc := bufio.NewScanner(out)
	pid := 0
	for pid == 0 && sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "PID "); ok {
			pid, err = strconv.Atoi(s)
			require.NoError(t, err)
		}
	}
	require.NotZero(t, pid, "the parent printed no child pid")
	st, err := ReadState(pid)
	require.NoError(t, err)
	require.NotEqual(t, StateGone, st)
	require.NoError(t, parent.Process.Kill())
	_ = parent.Wait()
	require.Eventually(t, func() bool { st, _ := ReadState(pid); return st == StateGone || st == StateZombie }, time.Minute, 10*time.Millisecond)
}

func TestStartErrors(t *testing.T) {
	tests := []struct {
		name string
		argv []string
	}{
		{name: "empty argv", argv: nil},
		{name: "no such executable", argv: []string{"/nonexistent/pdserver"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Start("x", tt.argv)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "supervisor: "), err.Error())
		})
	}
}

// A process that SIGKILL cannot get reaped must not hang Stop, and the error says why.
// Real cause, made here: a tracer (as a debugger or py-spy attached to a hung server)
// that never collects its tracee's exit, so the parent cannot reap it (the other real
// cause, a process stuck in a kernel call in state D, cannot be made on demand).
func TestStopBoundedWhenNotReaped(t *testing.T) {
	p, err := Start("sleeper", []string{"sleep", "1000"}, WithStopTimeout(200*time.Millisecond), WithReapTimeout(500*time.Millisecond))
	require.NoError(t, err)
	argv, _ := self(t, "tracer", strconv.Itoa(p.PID()))
	tracer := exec.Command(argv[0], argv[1:]...)
	tracer.Env = append(os.Environ(), childEnv+"=tracer")
	out, err := tracer.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, tracer.Start())
	sc := bufio.NewScanner(out)
	var line string
	for sc.Scan() {
		if line = sc.Text(); strings.HasPrefix(line, "ATTACHED") || strings.HasPrefix(line, "SEIZE") {
			break
		}
	}
	if strings.HasPrefix(line, "SEIZE") {
		_ = tracer.Wait()
		require.NoError(t, p.Stop(context.Background()))
		t.Skipf("SKIPPED, not passed: ptrace is not permitted here (%s)", line)
	}
	require.Equal(t, "ATTACHED", line)

	start := time.Now()
	err = p.Stop(context.Background())
	took := time.Since(start)
	require.ErrorIs(t, err, ErrNotReaped, "the tracer holds the exit: Stop returns, bounded")
	assert.Contains(t, err.Error(), fmt.Sprintf("traced by pid %d", tracer.Process.Pid))
	assert.Contains(t, err.Error(), "sleeper")
	assert.Less(t, took, 30*time.Second, "bounded by the stop and reap timeouts, not the tracer")
	select {
	case <-p.Exited():
		t.Fatal("reaped while the tracer holds it")
	default:
	}

	// Once the tracer is gone the process is reaped, and Stop is a no-op again.
	require.NoError(t, tracer.Process.Kill())
	_ = tracer.Wait()
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("not reaped after the tracer died")
	}
	require.NoError(t, p.Stop(context.Background()))
}

func TestParseTracerPid(t *testing.T) {
	assert.Equal(t, 4242, ParseTracerPid([]byte("Name:\tsleep\nState:\tZ (zombie)\nTracerPid:\t4242\nUid:\t0\n")))
	assert.Equal(t, 0, ParseTracerPid([]byte("Name:\tsleep\nTracerPid:\t0\n")))
	assert.Equal(t, 0, ParseTracerPid([]byte("TracerPid:\tx\n")))
	assert.Equal(t, 0, ParseTracerPid(nil))
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	assert.Equal(t, 0, ParseTracerPid(status), "this test is not traced")
}

func FuzzParseTracerPid(f *testing.F) {
	f.Add([]byte("TracerPid:\t12\n"))
	f.Add([]byte("TracerPid:\t-3\n"))
	f.Add([]byte("Name:\tx\nTracerPid:\t99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := ParseTracerPid(b); n < 0 {
			t.Fatalf("negative pid %d", n)
		}
	})
}
