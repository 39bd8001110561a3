package target

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"pdsoak/internal/testutil"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/chaos"
	"pdsoak/scenarios"
	"pdsoak/server/launcher"
	"pdsoak/supervisor"
)

// fakepd is the harness's stand-in for pdserver (../testdata/fakepd), built once.
var fakepd string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "target-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakepd = filepath.Join(dir, "fakepd")
	if out, err := exec.Command("go", "build", "-o", fakepd, "../testdata/fakepd").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build fakepd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func freePort(t *testing.T) int { return testutil.FreePort(t) }

func TestOpenExternal(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	closed := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	accept := func(context.Context, string) error { return nil }
	refuse := func(context.Context, string) error { return errors.New("no") }
	tests := []struct {
		name        string
		tgt         scenarios.Target
		probe       func(context.Context, string) error
		wantErr     string
		wantMetrics []Source
		wantDebug   []Source
	}{
		{name: "named endpoints", tgt: scenarios.Target{URL: srv.URL + "/", MetricsURL: srv.URL + "/m", DebugURL: srv.URL + "/d"}, probe: refuse,
			wantMetrics: []Source{{Process: "target", URL: srv.URL + "/m"}}, wantDebug: []Source{{Process: "target", URL: srv.URL + "/d"}}},
		{name: "debug endpoint found by the probe", tgt: scenarios.Target{URL: srv.URL}, probe: accept,
			wantDebug: []Source{{Process: "target", URL: srv.URL + "/debug/requests"}}},
		{name: "probe refuses: no debug endpoint", tgt: scenarios.Target{URL: srv.URL}, probe: refuse},
		{name: "no probe", tgt: scenarios.Target{URL: srv.URL}},
		{name: "bad url", tgt: scenarios.Target{URL: "::"}, wantErr: "bad url"},
		{name: "unreachable", tgt: scenarios.Target{URL: closed}, wantErr: "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Tight only where unreachable is the expected outcome; a target that is
			// there gets a bound a loaded machine keeps.
			reach := 30 * time.Second
			if tt.wantErr == "unreachable" {
				reach = 300 * time.Millisecond
			}
			opts := []Option{WithReachTimeout(reach)}
			if tt.probe != nil {
				opts = append(opts, WithDebugProbe(tt.probe))
			}
			got, err := OpenExternal(context.Background(), tt.tgt, opts...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.True(t, strings.HasPrefix(err.Error(), "target: "), err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, srv.URL, got.URL())
			assert.Equal(t, tt.wantMetrics, got.MetricsSources())
			assert.Equal(t, tt.wantDebug, got.DebugSources())
			require.NoError(t, got.Stop(context.Background()))
		})
	}
}

func launchSpec(name string, port int) scenarios.Launch {
	return scenarios.Launch{Name: name, Role: "colocated", Command: []string{fakepd, "colocated", "--port", strconv.Itoa(port)},
		HealthURL: fmt.Sprintf("http://127.0.0.1:%d/health", port), StartTimeout: scenarios.Duration(20 * time.Second),
		Env: map[string]string{"LAUNCH_TEST": "1"}}
}

func TestLaunched(t *testing.T) {
	port := freePort(t)
	logDir := filepath.Join(t.TempDir(), "logs")
	tgt := scenarios.Target{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Launch: []scenarios.Launch{launchSpec("server", port)}}
	l, err := StartLaunched(context.Background(), tgt, logDir)
	require.NoError(t, err)
	defer l.Stop(context.Background())

	p, err := l.Process("server")
	require.NoError(t, err)
	assert.Equal(t, chaos.Process{Name: "server", Role: "colocated", PID: p.PID, URL: tgt.URL}, p)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
	require.NoError(t, err)
	assert.Contains(t, string(environ), "LAUNCH_TEST=1")

	require.NoError(t, l.Signal("server", syscall.SIGSTOP))
	require.Eventually(t, func() bool { st, _ := supervisor.ReadState(p.PID); return st == supervisor.StateStopped }, time.Minute, 10*time.Millisecond)
	require.NoError(t, l.Restart(context.Background(), "server"), "a paused process restarts")
	p2, err := l.Process("server")
	require.NoError(t, err)
	assert.NotEqual(t, p.PID, p2.PID)

	_, err = l.Process("nope")
	assert.Error(t, err)
	_, err = l.Failpoints("server")
	assert.ErrorIs(t, err, chaos.ErrUnsupported)
	_, err = l.Link("server->x")
	assert.ErrorIs(t, err, chaos.ErrUnsupported)

	require.NoError(t, l.Stop(context.Background()))
	st, err := supervisor.ReadState(p2.PID)
	require.NoError(t, err)
	assert.Equal(t, supervisor.StateGone, st)
	b, err := os.ReadFile(filepath.Join(logDir, "server.log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(b), "listening"), "the log shows both starts")
}

// A launch that fails stops what it had started.
func TestLaunchedFailureStopsEverything(t *testing.T) {
	port := freePort(t)
	// "bad" exits at once: its port is held here.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer ln.Close()
	bad := launchSpec("bad", port)
	first := launchSpec("first", freePort(t))
	_, err = StartLaunched(context.Background(), scenarios.Target{URL: "http://127.0.0.1:1", Launch: []scenarios.Launch{first, bad}}, t.TempDir())
	require.ErrorIs(t, err, supervisor.ErrExited)
	assert.ErrorContains(t, err, "bad exited before it was healthy")
	resp, err := http.Get(first.HealthURL)
	if err == nil {
		resp.Body.Close()
	}
	assert.Error(t, err, "the first process was stopped")
}

func TestEmbeddedColocated(t *testing.T) {
	tests := []struct {
		name   string
		faults bool
	}{
		{name: "fault injection on", faults: true},
		{name: "fault injection off", faults: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := scenarios.Reference{Backend: "tinyref", Semantics: "strict", FaultInjection: tt.faults,
				StartTimeout: scenarios.Duration(20 * time.Second)}
			logDir := t.TempDir()
			tg, err := StartEmbedded(context.Background(), ref, []string{fakepd}, logDir)
			require.NoError(t, err)
			defer tg.Stop(context.Background())
			c, ok := tg.(*Colocated)
			require.True(t, ok, "%T", tg)
			p, err := c.Process(ColocatedName)
			require.NoError(t, err)
			assert.Equal(t, []Source{{Process: ColocatedName, URL: c.URL() + "/metrics"}}, c.MetricsSources())

			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
			require.NoError(t, err)
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
			require.NoError(t, err)
			assert.Equal(t, tt.faults, strings.Contains(string(environ), launcher.FaultTokenEnv+"="), "the token is in the environment")
			assert.Equal(t, tt.faults, strings.Contains(string(cmdline), "--enable-fault-injection"))
			fp, err := c.Failpoints(ColocatedName)
			if tt.faults {
				require.NoError(t, err)
				assert.NotNil(t, fp)
				assert.Len(t, c.token, 32)
				assert.NotContains(t, string(cmdline), c.token, "the token is not in argv")
				assert.Contains(t, string(environ), launcher.FaultTokenEnv+"="+c.token)
			} else {
				assert.ErrorIs(t, err, chaos.ErrUnsupported)
			}

			require.NoError(t, c.Restart(context.Background(), ColocatedName))
			p2, err := c.Process(ColocatedName)
			require.NoError(t, err)
			assert.NotEqual(t, p.PID, p2.PID)
			assert.Equal(t, p.URL, p2.URL, "same port")
			require.NoError(t, tg.Stop(context.Background()))
			b, err := os.ReadFile(filepath.Join(logDir, "colocated.log"))
			require.NoError(t, err)
			if tt.faults {
				assert.NotContains(t, string(b), c.token)
			}
		})
	}
}

func TestEmbeddedTopology(t *testing.T) {
	ref := scenarios.Reference{Prefill: 2, Decode: 1, Backend: "tinyref", Semantics: "strict", FaultInjection: true,
		Proxies: true, StartTimeout: scenarios.Duration(20 * time.Second)}
	tg, err := StartEmbedded(context.Background(), ref, []string{fakepd}, t.TempDir())
	require.NoError(t, err)
	defer tg.Stop(context.Background())
	e, ok := tg.(*Embedded)
	require.True(t, ok, "%T", tg)
	assert.Equal(t, e.Topology().RouterURL, e.URL())
	var metrics, debug []string
	for _, s := range e.MetricsSources() {
		metrics = append(metrics, s.Process)
	}
	for _, s := range e.DebugSources() {
		debug = append(debug, s.Process)
	}
	assert.Equal(t, []string{"prefill-0", "prefill-1", "decode-0"}, metrics)
	assert.Equal(t, []string{"prefill-0", "prefill-1", "decode-0", "router"}, debug)
	for _, p := range e.Topology().Processes() {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		require.NoError(t, err)
		assert.NotContains(t, string(cmdline), e.token, p.Name)
	}
	_, err = e.Failpoints("decode-0")
	require.NoError(t, err)
	_, err = e.Link("prefill-0->decode-0")
	require.NoError(t, err)
	require.NoError(t, tg.Stop(context.Background()))
}

func TestEmbeddedStartFailure(t *testing.T) {
	tests := []struct {
		name    string
		ref     scenarios.Reference
		command []string
	}{
		{name: "no command", ref: scenarios.Reference{Prefill: 1, Decode: 1}},
		{name: "topology: no such binary", ref: scenarios.Reference{Prefill: 1, Decode: 1}, command: []string{"/nonexistent/pdserver"}},
		{name: "colocated: no such binary", command: []string{"/nonexistent/pdserver"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := StartEmbedded(context.Background(), tt.ref, tt.command, t.TempDir())
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "target: "), err.Error())
		})
	}
}
