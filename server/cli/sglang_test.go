package cli

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/internal/testutil"
	"pdsoak/server/engine"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestTranslateServer(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		role     engine.Role
		want     []string
		recorded []string
		ignored  []string
		err      string
	}{
		{
			name: "prefill with PD flags",
			args: []string{"--model-path", "/m/llama", "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "8998",
				"--disaggregation-transfer-backend", "nixl", "--base-gpu-id", "0", "--enable-metrics", "--port", "30100",
				"--host", "0.0.0.0", "--max-running-requests", "48", "--mem-fraction-static=0.8", "--trust-remote-code", "--tp", "2"},
			role: rolePrefill,
			want: []string{"--disaggregation-bootstrap-port=8998", "--port=30100", "--host=0.0.0.0", "--max-running-requests=48",
				"--mem-fraction-static=0.8"},
			recorded: []string{"--model-path=/m/llama", "--disaggregation-transfer-backend=nixl", "--base-gpu-id=0"},
			ignored:  []string{"--trust-remote-code", "--tp=2"},
		},
		{
			name: "decode drops the bootstrap port and maps the incident's flags",
			args: []string{"--disaggregation-mode=decode", "--disaggregation-bootstrap-port=8998", "--max-queued-requests", "32",
				"--context-length", "524288", "--cuda-graph-max-bs", "96", "--disable-overlap-schedule", "--max-total-tokens", "768",
				"--page-size", "16", "--served-model-name", "m", "--random-seed", "7"},
			role: roleDecode,
			want: []string{"--max-queued-requests=32", "--context-length=524288", "--cuda-graph-max-bs=96", "--disable-overlap-schedule",
				"--max-total-tokens=768", "--page-size=16", "--model-name=m", "--seed=7"},
			recorded: []string{"--disaggregation-bootstrap-port=8998"},
		},
		{
			name: "no mode is colocated",
			args: []string{"--model-path", "x", "--port", "30000"},
			role: roleColocated,
			want: []string{"--port=30000"}, recorded: []string{"--model-path=x"},
		},
		{
			name: "pdsoak flags and environment",
			args: []string{"--disaggregation-mode", "decode", "--pdsoak-semantics", "sglang", "--pdsoak-enable-fault-injection"},
			env: map[string]string{SemanticsEnv: "strict", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "3",
				"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "4", "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "5",
				"SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": "2"},
			role: roleDecode,
			// The command line's --pdsoak-semantics wins over PDSOAK_SEMANTICS.
			want: []string{"--semantics=sglang", "--enable-fault-injection", "--bootstrap-timeout=3", "--transfer-timeout=4",
				"--kv-heartbeat-interval=5", "--kv-heartbeat-max-failure=2"},
		},
		{
			name: "semantics from the environment",
			args: []string{"--disaggregation-mode", "prefill"},
			env:  map[string]string{SemanticsEnv: "sglang"},
			role: rolePrefill, want: []string{"--semantics=sglang"},
		},
		{name: "bad mode", args: []string{"--disaggregation-mode", "both"}, err: `--disaggregation-mode "both" is unknown`},
		{name: "bad backend", args: []string{"--disaggregation-transfer-backend", "carrier-pigeon"}, err: "is unknown (mooncake, nixl"},
		{name: "value missing", args: []string{"--port"}, err: "--port needs a value"},
		{name: "stray word", args: []string{"serve"}, err: `unexpected argument "serve"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := translateServer(tc.args, envOf(tc.env))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.role, tr.role)
			assert.Equal(t, tc.want, tr.args)
			assert.Equal(t, tc.recorded, tr.recorded)
			assert.Equal(t, tc.ignored, tr.ignored)
			// Every translated argument must be a flag the worker command accepts.
			cmd := newWorkerCommand(tr.role)
			require.NoError(t, cmd.ParseFlags(tr.args))
		})
	}
}

func TestTranslateRouter(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string
		ignored []string
		metrics string
		err     string
	}{
		{
			name: "PD with bootstrap ports",
			args: []string{"--pd-disaggregation", "--prefill", "http://127.0.0.1:30100", "8998", "--prefill", "http://10.0.0.2:30100", "none",
				"--decode", "http://127.0.0.1:30200", "--host", "0.0.0.0", "--port", "30000", "--policy", "cache_aware",
				"--prometheus-port", "29000"},
			want: []string{"--decode=http://127.0.0.1:30200", "--host=0.0.0.0", "--port=30000", "--prefill=http://127.0.0.1:30100",
				"--prefill-bootstrap=127.0.0.1:8998", "--prefill=http://10.0.0.2:30100", "--prefill-bootstrap=10.0.0.2:8998"},
			ignored: []string{"--policy cache_aware"},
			metrics: "127.0.0.1:29000",
		},
		{
			name: "without bootstrap ports pdserver asks the workers",
			args: []string{"--pd-disaggregation", "--prefill=http://p:1", "--decode=http://d:2", "--health-check-interval-secs", "1",
				"--retry-max-retries", "0", "--pdsoak-max-retries", "2"},
			want: []string{"--decode=http://d:2", "--health-interval=1", "--max-retries=0", "--max-retries=2", "--prefill=http://p:1"},
		},
		{name: "not PD", args: []string{"--worker-urls", "http://a"}, err: "only --pd-disaggregation"},
		{name: "bad bootstrap port", args: []string{"--pd-disaggregation", "--prefill", "http://p:1", "x"}, err: "is not a port"},
		{name: "too many prefill values", args: []string{"--pd-disaggregation", "--prefill", "a", "1", "2"}, err: "takes URL [BOOTSTRAP_PORT]"},
		{name: "decode twice", args: []string{"--pd-disaggregation", "--decode", "a", "b"}, err: "--decode takes one value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := translateRouter(tc.args)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, tr.args)
			assert.Equal(t, tc.ignored, tr.ignored)
			assert.Equal(t, tc.metrics, tr.metricsAddr)
			require.NoError(t, newRouterCommand().ParseFlags(tr.args))
		})
	}
}

func TestSGLangUsageErrors(t *testing.T) {
	code, _, stderr := run(t, "sglang-server", "--disaggregation-mode", "both")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "pdserver: sglang-server: --disaggregation-mode")
	code, _, stderr = run(t, "sglang-router", "--prefill", "http://a")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "only --pd-disaggregation")
	code, stdout, _ := run(t, "sglang-server", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "--disaggregation-mode")
}

func freePort(t *testing.T) int { return testutil.FreePort(t) }

// TestSGLangServerServesAndLogsFlags starts a colocated worker from an SGLang command
// line over real sockets: it serves, and the startup line lists the flags with no effect.
func TestSGLangServerServesAndLogsFlags(t *testing.T) {
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Execute(ctx, []string{"sglang-server", "--model-path", "/models/x", "--port", strconv.Itoa(port),
			"--enable-metrics", "--trust-remote-code", "--attention-backend", "fa3"}, io.Discard, &logs)
	}()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	testutil.WaitHealthy(t, url+"/health", 20*time.Second)
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(body), "sglang:num_running_reqs")
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "%s", logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("sglang-server did not stop")
	}
	line := logs.String()
	assert.Contains(t, line, `no_effect_here="--trust-remote-code --attention-backend=fa3"`)
	assert.Contains(t, line, `recorded="--model-path=/models/x"`)
	assert.Contains(t, line, "role=colocated")
}

// FuzzTranslate checks that no SGLang command line panics the translators, and that
// whatever the server translator accepts, the worker command parses.
func FuzzTranslate(f *testing.F) {
	for _, s := range []string{"--disaggregation-mode prefill --port 1", "--pd-disaggregation --prefill http://a:1 2 --decode http://b:3",
		"--x=y --enable-metrics", "--pdsoak-semantics sglang", "--prefill", "--port=", "-- x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Fields(s)
		if tr, err := translateServer(args, envOf(nil)); err == nil {
			for _, a := range tr.args {
				require.True(t, strings.HasPrefix(a, "--"), "%q", a)
			}
		}
		_, _ = translateRouter(args)
	})
}
