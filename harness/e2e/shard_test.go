package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/internal/testutil"
	"pdsoak/reports"
)

// referenceUp starts `pdserver up --prefill 1 --decode 1` and waits for the router's
// /health; it returns the router's URL and the workers' URLs by name (prefill-0,
// decode-0). The topology is stopped (SIGINT) when the test ends.
func referenceUp(t *testing.T) (string, map[string]string) {
	t.Helper()
	pd := buildPDServer(t)
	port := freePorts(t, 1)[0]
	cmd := exec.Command(pd, "up", "--prefill", "1", "--decode", "1", "--port", fmt.Sprint(port),
		"--backend", "tinyref", "--log-dir", t.TempDir())
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	router := fmt.Sprintf("http://127.0.0.1:%d", port)
	require.Eventually(t, func() bool {
		select {
		case err := <-exited:
			exited <- err
			return true // fail below, with the output
		default:
		}
		return testutil.Healthy(router+"/health") && strings.Contains(out.String(), "router: http")
	}, time.Minute, 100*time.Millisecond, "pdserver up did not become healthy")
	select {
	case err := <-exited:
		t.Fatalf("pdserver up exited: %v\n%s", err, out.String())
	default:
	}
	workers := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^((?:prefill|decode)-\d+)\s+pid \d+\s+(http://\S+)`).FindAllStringSubmatch(out.String(), -1) {
		workers[m[1]] = m[2]
	}
	require.Len(t, workers, 2, "pdserver up's listing:\n%s", out.String())
	return router, workers
}

// shardRefScenario is count-based (agent sessions and a burst, no open-loop pacer), so
// the request ids are fixed by the counts, not by the clock; its leak check scrapes both
// workers' running/queued gauges.
func shardRefScenario(t *testing.T, router string, workers map[string]string) string {
	t.Helper()
	var metrics []string
	for name, u := range workers {
		metrics = append(metrics, fmt.Sprintf("%s: %s/metrics", name, u))
	}
	sort.Strings(metrics)
	body := fmt.Sprintf(`# shards-ref: sharded runs against one reference topology. Expected: pass.
name: shards-ref
seed: 7
duration: 20s
target:
  url: %s
  metrics_urls: {%s}
workloads:
  - name: agents
    type: agents
    agents: 6
    turns: 2
    max_tokens: 4
  - name: burst
    type: burst
    count: 9
    max_tokens: 4
deadlines: {connect: 30s, first_token: 30s, stall: 30s, total: 1m}
drain: {timeout: 30s, leak_timeout: 20s}
self_check: {max_lag: 30s}
assertions: [no_silent_drops, valid_responses, no_leaks]
`, router, strings.Join(metrics, ", "))
	p := filepath.Join(t.TempDir(), "shards-ref.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

// harnessExec runs the harness binary with args; it returns the exit code and output.
// It is safe to call from any goroutine (no t.Fatal).
func harnessExec(args ...string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, harnessBin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out), nil
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out), nil
	}
	return -1, string(out), fmt.Errorf("harness %s: %w", strings.Join(args, " "), err)
}

// TestShardProcessesAgainstReferenceTopology is issue 14's sharding test with real
// processes: one reference topology (pdserver up), the unsharded run, then n = 1, 2 and
// 4 `harness run --shard i/n` processes at once against it, merged by `harness merge`.
// The merged run has the unsharded run's request ids and outcome totals, its count is
// the sum of the shards', and it passes — no_leaks included, judged from the leak check
// that started last, after every other shard had finished.
func TestShardProcessesAgainstReferenceTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference topology and harness processes")
	}
	router, workers := referenceUp(t)
	scenario := shardRefScenario(t, router, workers)

	whole := runHarness(t, scenario, "--target", router)
	require.Equal(t, 0, whole.code, "unsharded run: want PASS\n%s", whole.diagnostics())
	want := testutil.DoneIDs(t, whole.out)
	require.Len(t, want, 6*2+9, "the unsharded run's plan: 6 agents x 2 turns + a burst of 9")
	require.NotNil(t, whole.res.Leak, "the unsharded run scraped the workers' gauges")
	require.Equal(t, reports.StatePass, whole.res.Leak.State, whole.res.Leak.Detail)

	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) {
			start := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
			dirs := make([]string, n)
			codes := make([]int, n)
			outs := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				dirs[i] = filepath.Join(t.TempDir(), fmt.Sprintf("shard%d", i+1))
				wg.Go(func() {
					codes[i], outs[i], errs[i] = harnessExec("run", scenario, "--target", router, "--out", dirs[i], "-q",
						"--shard", fmt.Sprintf("%d/%d", i+1, n), "--shard-start", start)
				})
			}
			wg.Wait()
			sum := 0
			for i := range n {
				require.NoError(t, errs[i])
				res := readResultsFile(t, dirs[i])
				// A shard's own no_leaks may fail (it saw other shards' requests): its
				// verdict is not the run's, so only its accounting is required here.
				assert.Contains(t, []int{0, 1}, codes[i], "shard %d/%d: %s", i+1, n, outs[i])
				assert.Zero(t, res.Unresolved, "shard %d", i+1)
				require.NotNil(t, res.Shard)
				assert.Equal(t, i+1, res.Shard.Index)
				sum += res.Requests
			}

			merged := filepath.Join(t.TempDir(), "merged")
			code, out, err := harnessExec(append(append([]string{"merge"}, dirs...), "--out", merged, "-q")...)
			require.NoError(t, err)
			res := readResultsFile(t, merged)
			require.Equal(t, 0, code, "merged: want PASS: %s\ninvalid: %v\nassertions: %+v", out, res.InvalidReasons, res.Assertions)

			assert.Equal(t, want, testutil.DoneIDs(t, merged), "the merged request ids are the unsharded run's")
			assert.Equal(t, whole.res.Outcomes, res.Outcomes, "outcome totals")
			assert.Equal(t, whole.res.Requests, res.Requests)
			assert.Equal(t, sum, res.Requests, "merged count is the sum of the shards'")
			assert.Equal(t, reports.VerdictPass, res.Verdict)
			leaks := assertion(res, reports.AssertNoLeaks)
			require.NotNil(t, leaks)
			assert.Equal(t, reports.StatePass, leaks.State, leaks.Detail)
			assert.Contains(t, leaks.Detail, "the last to start, after every other shard had finished")
			own := 0
			for _, note := range res.Notes {
				if strings.Contains(note, "'s own leak check") {
					own++
					t.Log(note)
				}
			}
			assert.Equal(t, n, own, "every shard's own leak check is in the notes")
		})
	}
}

// readResultsFile reads DIR/results.json.
func readResultsFile(t *testing.T, dir string) reports.Results {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, reports.ResultsFile))
	require.NoError(t, err)
	var res reports.Results
	require.NoError(t, json.Unmarshal(data, &res))
	return res
}
