package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/server/engine"
	"pdsoak/version"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// execute runs the root command with args and returns its error and output.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// run is `pdserver args...` through Execute: exit code, stdout, stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := Execute(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// assertUserFacing checks what pdserver prints on an error: every line starts with
// "pdserver", and no internal package name leaks.
func assertUserFacing(t *testing.T, stderr string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		assert.True(t, strings.HasPrefix(l, "pdserver"), "line %q lacks the pdserver prefix", l)
	}
	for _, pkg := range []string{"cli: ", "engine: ", "scheduler: ", "kvpool: ", "kernels: "} {
		assert.NotContains(t, stderr, pkg, "an internal package name leaks")
	}
}

func TestUsageErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-file")
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	tests := []struct {
		name string
		args []string
		want []string // the message must contain each
	}{
		{"unknown flag", []string{"colocated", "--no-such-flag"}, []string{"--no-such-flag"}},
		{"bad int", []string{"colocated", "--port", "abc"}, []string{"--port"}},
		{"port range", []string{"colocated", "--port", "70000"}, []string{"pdserver: --port must be in [0, 65535] (got 70000)"}},
		{"backend", []string{"colocated", "--backend", "gpu"}, []string{"--backend"}},
		{"semantics", []string{"decode", "--semantics", "loose"}, []string{`pdserver: --semantics "loose" is unknown`}},
		{"mem fraction", []string{"colocated", "--mem-fraction-static", "1.5"}, []string{"pdserver: --mem-fraction-static must be in (0, 1] (got 1.5)"}},
		{"context length", []string{"colocated", "--context-length", "0"}, []string{"pdserver: --context-length must be > 1 (got 0)"}},
		{"max running", []string{"colocated", "--max-running-requests", "0"}, []string{"pdserver: --max-running-requests must be > 0 (got 0)"}},
		{"page size", []string{"colocated", "--page-size", "-1"}, []string{"pdserver: --page-size must be in [0, 4096] (got -1)"}},
		{"max total below a page", []string{"colocated", "--max-total-tokens", "3"}, []string{"--max-total-tokens 3 is less than one page"}},
		{"timeout", []string{"colocated", "--watchdog-timeout", "soon"}, []string{"--watchdog-timeout"}},
		{"log level", []string{"colocated", "--log-level", "loud"}, []string{"--log-level"}},
		{"profile", []string{"colocated", "--backend", "simtime", "--sim-profile", "nope"}, []string{"--sim-profile"}},
		{"fault injection without a token", []string{"colocated", "--enable-fault-injection"},
			[]string{"--enable-fault-injection needs a bearer token", FaultTokenEnv, "--fault-injection-token-file"}},
		{"the old token flag is gone", []string{"colocated", "--enable-fault-injection", "--fault-injection-token", "x"},
			[]string{"unknown flag: --fault-injection-token"}},
		{"token file missing", []string{"colocated", "--enable-fault-injection", "--fault-injection-token-file", missing},
			[]string{"--fault-injection-token-file: cannot read " + missing}},
		{"token file empty", []string{"colocated", "--enable-fault-injection", "--fault-injection-token-file", empty},
			[]string{"--fault-injection-token-file: " + empty + " is empty"}},
		{"token file without fault injection", []string{"colocated", "--fault-injection-token-file", empty},
			[]string{"--fault-injection-token-file has no effect without --enable-fault-injection"}},
		{"bootstrap port on decode", []string{"decode", "--disaggregation-bootstrap-port", "1"}, []string{"--disaggregation-bootstrap-port"}},
		{"stray argument", []string{"colocated", "extra"}, []string{"extra"}},
		{"unknown command", []string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"did you mean", []string{"colocate"}, []string{"did you mean colocated?"}},
		{"did you mean, a typo", []string{"colocatd"}, []string{"did you mean colocated?"}},
		{"negative heartbeat", []string{"decode", "--kv-heartbeat-interval", "-1s", "--kv-heartbeat-max-failure", "-2"},
			[]string{"--kv-heartbeat-interval must be >= 0", "--kv-heartbeat-max-failure must be >= 0 (got -2)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(FaultTokenEnv, "")
			code, _, stderr := run(t, tc.args...)
			assert.Equal(t, 2, code, stderr)
			for _, w := range tc.want {
				assert.Contains(t, stderr, w)
			}
			assertUserFacing(t, stderr)
		})
	}
}

func TestNoArgumentsPrintsUsageOnStderr(t *testing.T) {
	code, stdout, stderr := run(t)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "Usage:")
	assert.Contains(t, stderr, "colocated")
	assert.True(t, strings.HasSuffix(stderr, "\npdserver: a command is required\n"), stderr)
}

func TestVersion(t *testing.T) {
	code, stdout, _ := run(t, "--version")
	assert.Equal(t, 0, code)
	assert.Equal(t, version.String()+"\n", stdout)
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			code, stdout, stderr := run(t, "completion", shell)
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, stdout, "pdserver")
		})
	}
}

func TestManyProblemsAtOnce(t *testing.T) {
	code, _, stderr := run(t, "colocated", "--port", "-1", "--max-running-requests", "0", "--semantics", "x")
	assert.Equal(t, 2, code)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	assert.Len(t, lines, 3, stderr)
	for _, flag := range []string{"--port", "--max-running-requests", "--semantics"} {
		assert.Contains(t, stderr, flag)
	}
	assertUserFacing(t, stderr)
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"plain", errors.New("boom"), "pdserver: boom"},
		{"internal prefixes", errors.New("cli: --port 1: engine: scheduler: no"), "pdserver: --port 1: no"},
		{"every line", errors.Join(errors.New("--a bad"), errors.New("kernels: --b bad")), "pdserver: --a bad\npdserver: --b bad"},
		{"already prefixed", errors.New("pdserver up: the router exited"), "pdserver up: the router exited"},
		{"nil", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ErrorText(tc.err))
		})
	}
}

func TestHelpListsSGLangFlags(t *testing.T) {
	out, err := execute(t, "prefill", "--help")
	require.NoError(t, err)
	for _, flag := range []string{"--host", "--port", "--model-name", "--backend", "--seed", "--sim-profile",
		"--max-queued-requests", "--max-running-requests", "--context-length", "--mem-fraction-static",
		"--device-memory-gb", "--max-total-tokens", "--page-size", "--cuda-graph-max-bs", "--chunked-prefill-size",
		"--disable-overlap-schedule", "--watchdog-timeout", "--bootstrap-timeout", "--prealloc-timeout",
		"--transfer-timeout", "--waiting-timeout", "--running-timeout", "--request-timeout", "--semantics",
		"--disaggregation-bootstrap-port", "--log-level", "--enable-fault-injection", "--fault-injection-token-file"} {
		assert.Contains(t, out, flag)
	}
}

func TestEveryCommandIsRegistered(t *testing.T) {
	root := NewRootCommand()
	for _, name := range []string{"colocated", "prefill", "decode", "router", "up", "sglang-server", "sglang-router"} {
		c, _, err := root.Find([]string{name})
		require.NoError(t, err, name)
		assert.Equal(t, name, c.Name())
	}
}

func TestSecondsValue(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"300", 300 * time.Second, true}, {"0.5", 500 * time.Millisecond, true}, {"-1", -time.Second, true},
		{"250ms", 250 * time.Millisecond, true}, {"5m", 5 * time.Minute, true}, {"0", 0, true},
		{"soon", 0, false}, {"NaN", 0, false}, {"1e300", 0, false}, {"", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var s secondsValue
			err := s.Set(tc.in)
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, time.Duration(s))
		})
	}
}

func TestFlagsMapOntoConfigs(t *testing.T) {
	f := defaultWorkerFlags()
	fs := pflag.NewFlagSet("decode", pflag.ContinueOnError)
	f.register(fs, false)
	require.NoError(t, fs.Parse([]string{"--max-queued-requests", "32", "--context-length", "524288",
		"--mem-fraction-static", "0.5", "--cuda-graph-max-bs", "96", "--disable-overlap-schedule",
		"--semantics", "sglang", "--transfer-timeout", "15", "--prealloc-timeout", "-1", "--backend", "simtime",
		"--page-size", "32", "--seed", "9", "--model-name", "m", "--chunked-prefill-size", "0", "--retry-after", "2"}))
	require.NoError(t, f.validate())
	ec := f.engineConfig(engine.RoleDecode)
	want := engine.DefaultConfig()
	want.Role, want.Semantics, want.MaxQueuedRequests, want.ContextLength = engine.RoleDecode, engine.SemanticsSGLang, 32, 524288
	want.MemFractionStatic, want.CudaGraphMaxBS, want.DisableOverlapSchedule = 0.5, 96, true
	want.TransferTimeout, want.PreallocTimeout, want.PageSize = 15*time.Second, -time.Second, 32
	want.ChunkedPrefillSize, want.RetryAfter = 0, 2*time.Second
	assert.Equal(t, want, ec)
	require.NoError(t, ec.Validate())
	kc := f.kernelsConfig()
	assert.Equal(t, "simtime", kc.Backend)
	assert.Equal(t, 32, kc.PageSize)
	assert.Equal(t, uint64(9), kc.Seed)
	assert.Equal(t, "m", kc.Model)
}

func TestExitCode(t *testing.T) {
	assert.Equal(t, 0, ExitCode(nil))
	assert.Equal(t, 1, ExitCode(context.Canceled))
	assert.Equal(t, 2, ExitCode(&UsageError{Err: context.Canceled}))
}
