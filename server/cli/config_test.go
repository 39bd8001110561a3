package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
	"pdsoak/server/engine"
	"pdsoak/server/kvtransfer"
	"pdsoak/server/scheduler"
)

func TestWorkerConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		role  engine.Role
		args  []string
		check func(t *testing.T, sp WorkerSpec)
		err   string
	}{
		{"defaults", roleColocated, nil, func(t *testing.T, sp WorkerSpec) {
			assert.Equal(t, kernels.DefaultNumPages, sp.Pages)
			assert.Equal(t, scheduler.SemanticsStrict, sp.Engine.Semantics)
			assert.Equal(t, kernels.DefaultPageSize, sp.Engine.PageSize)
			assert.Equal(t, kvtransfer.DefaultProgressTimeout, sp.ProgressTimeout)
			assert.False(t, sp.SeedSet)
		}, ""},
		{"the incident's decode", roleDecode, []string{"--backend", "tinyref", "--semantics", "sglang", "--max-queued-requests=32",
			"--context-length=524288", "--cuda-graph-max-bs=96", "--disable-overlap-schedule", "--max-total-tokens=768", "--seed=3",
			"--enable-fault-injection"},
			func(t *testing.T, sp WorkerSpec) {
				assert.Equal(t, 48, sp.Pages)
				assert.Equal(t, 48, sp.Kernels.NumPages)
				assert.Equal(t, 96, sp.Engine.CudaGraphMaxBS)
				assert.Equal(t, time.Duration(0), sp.ProgressTimeout, "sglang: no bound between frames")
				assert.True(t, sp.SeedSet)
				assert.Equal(t, uint64(3), sp.Kernels.Seed)
			}, ""},
		{"sglang waiting timeout bounds transferring", roleDecode, []string{"--semantics=sglang", "--disaggregation-waiting-timeout=7"},
			func(t *testing.T, sp WorkerSpec) {
				assert.Equal(t, 7*time.Second, sp.WaitingTimeout)
				assert.Equal(t, 7*time.Second, sp.ProgressTimeout)
			}, ""},
		{"...unless the bug keeps it unbounded", roleDecode, []string{"--semantics=sglang", "--disaggregation-waiting-timeout=7",
			"--sglang-bug=transferring-never-times-out"},
			func(t *testing.T, sp WorkerSpec) { assert.Equal(t, time.Duration(0), sp.ProgressTimeout) }, ""},
		{"heartbeat flags", rolePrefill, []string{"--kv-heartbeat-interval=2", "--kv-heartbeat-max-failure=3"},
			func(t *testing.T, sp WorkerSpec) {
				assert.Equal(t, 2*time.Second, sp.HeartbeatInterval)
				assert.Equal(t, 6*time.Second, sp.IdleTimeout)
			}, ""},
		{"a bad limit names its flag", roleDecode, []string{"--max-running-requests=0"}, nil, "--max-running-requests must be > 0"},
		{"an unknown flag", roleDecode, []string{"--nope"}, nil, "unknown flag: --nope"},
		{"prefill's flag on decode", roleDecode, []string{"--disaggregation-bootstrap-port=1"}, nil, "unknown flag"},
		{"a stray argument", roleDecode, []string{"x"}, nil, `unexpected argument "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := WorkerConfig(tc.role, tc.args)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.True(t, strings.HasPrefix(err.Error(), "cli: "))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.role, sp.Role)
			tc.check(t, sp)
		})
	}
}

func TestRouterConfig(t *testing.T) {
	sp, err := RouterConfig([]string{"--semantics", "sglang", "--max-retries=5", "--health-interval=0.5",
		"--sglang-bug=prefill-fail-no-decode-abort", "--abort-on-unhealthy=false", "--seed=9"})
	require.NoError(t, err)
	assert.Equal(t, scheduler.SemanticsSGLang, sp.Semantics)
	assert.Equal(t, 5, sp.MaxRetries)
	assert.Equal(t, 500*time.Millisecond, sp.HealthInterval)
	assert.False(t, sp.AbortOnUnhealthy)
	assert.Equal(t, uint64(9), sp.Seed)
	assert.True(t, sp.Bugs.Has(scheduler.BugPrefillFailNoDecodeAbort))

	_, err = RouterConfig([]string{"--semantics", "sglang", "--sglang-bug=decode-oom-requeue"})
	assert.ErrorContains(t, err, "is a worker bug")
	_, err = RouterConfig([]string{"--sglang-bug=prefill-fail-no-decode-abort"})
	assert.ErrorContains(t, err, "needs --semantics sglang")
}

func FuzzWorkerConfig(f *testing.F) {
	f.Add("--semantics=sglang --max-total-tokens=768")
	f.Add("--page-size 0 --max-total-tokens=1")
	f.Add("--watchdog-timeout=-1 --sglang-bug=x")
	f.Fuzz(func(t *testing.T, line string) {
		sp, err := WorkerConfig(roleDecode, strings.Fields(line))
		if err == nil && (sp.Pages <= 0 || sp.Engine.PageSize <= 0) {
			t.Fatalf("accepted %q with pages %d page size %d", line, sp.Pages, sp.Engine.PageSize)
		}
	})
}
