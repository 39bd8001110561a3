package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/internal/testutil"
	"pdsoak/ledger"
)

// shardScenario has every way a workload is split: agent sessions (5, uneven over 2 and
// 4 shards), a burst (7) and Poisson open-loop arrivals, so the union of the shards must
// equal the unsharded run id for id.
func shardScenario(t *testing.T) string {
	return writeFile(t, t.TempDir(), "shards.yaml", `# shards: sharding test. Expected: pass.
name: shards
seed: 11
duration: 3s
workloads:
  - name: agents
    type: agents
    agents: 5
    turns: 2
    max_tokens: 3
  - name: burst
    type: burst
    count: 7
    max_tokens: 3
  - name: open
    type: open_loop
    pacer: {type: poisson, rate: 8}
    max_tokens: 3
deadlines: {connect: 30s, first_token: 30s, stall: 30s, total: 1m}
drain: {timeout: 1m}
self_check: {max_lag: 30s}
assertions: [no_silent_drops, valid_responses]
`)
}

// runShards runs the n shards of scenario at once, in-process, against url, with a
// shared start a little ahead, and returns their output directories.
func runShards(t *testing.T, scenario, url string, n int) []string {
	t.Helper()
	start := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)
	dirs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		dirs[i] = filepath.Join(t.TempDir(), fmt.Sprintf("shard%d", i+1))
		wg.Go(func() {
			code, stdout, stderr := execute(t, []string{"run", scenario, "--target", url, "--out", dirs[i], "-q",
				"--shard", fmt.Sprintf("%d/%d", i+1, n), "--shard-start", start}, WithRunner(harnessRun))
			assert.Equal(t, ExitPass, code, "shard %d/%d\nstdout: %s\nstderr: %s", i+1, n, stdout, stderr)
		})
	}
	wg.Wait()
	return dirs
}

// TestShardsMergeToTheUnshardedRun is issue 14's done-when for sharding: n = 1, 2 and 4
// shards, run at once against one target and merged, send exactly the unsharded run's
// requests (id for id), with the same outcome totals; a merge missing a shard is invalid.
func TestShardsMergeToTheUnshardedRun(t *testing.T) {
	srv := fakeOpenAI(t, 0, nil)
	scenario := shardScenario(t)

	whole := filepath.Join(t.TempDir(), "whole")
	code, stdout, stderr := execute(t, []string{"run", scenario, "--target", srv.URL, "--out", whole, "-q"}, WithRunner(harnessRun))
	require.Equal(t, ExitPass, code, "stdout: %s\nstderr: %s", stdout, stderr)
	want := testutil.DoneIDs(t, whole)
	wantRes := readResults(t, whole)
	require.Greater(t, len(want), 5*2+7, "the open-loop workload sent nothing")

	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) {
			dirs := runShards(t, scenario, srv.URL, n)
			sum := 0
			for i, d := range dirs {
				res := readResults(t, d)
				require.NotNil(t, res.Shard, "shard %d: results.json carries the shard", i+1)
				assert.Equal(t, i+1, res.Shard.Index)
				require.NotNil(t, res.Shard.SharedStart, "the shared start is recorded")
				assert.GreaterOrEqual(t, res.Shard.Skew, 0.0, "a shard never starts before the shared start")
				sum += res.Requests
			}
			merged := filepath.Join(t.TempDir(), "merged")
			code, stdout, stderr := execute(t, append(append([]string{"merge"}, dirs...), "--out", merged, "-q"))
			require.Equal(t, ExitPass, code, "stdout: %s\nstderr: %s", stdout, stderr)
			assert.Equal(t, want, testutil.DoneIDs(t, merged), "the merged request ids are the unsharded run's")
			res := readResults(t, merged)
			assert.Equal(t, wantRes.Outcomes, res.Outcomes)
			assert.Equal(t, wantRes.Requests, res.Requests)
			assert.Equal(t, sum, res.Requests, "merged outcome counts are the sum of the shards'")
			require.NotNil(t, res.Shard)
			assert.Len(t, res.Shard.Parts, n)
			for _, p := range []string{"report.html", "junit.xml", "summary.md"} {
				assert.FileExists(t, filepath.Join(merged, p))
			}

			if n < 2 {
				return
			}
			// Without shard 2 the merge is invalid, never a smaller pass.
			partial := filepath.Join(t.TempDir(), "partial")
			args := append([]string{"merge"}, dirs[0])
			args = append(append(args, dirs[2:]...), "--out", partial, "-q")
			code, stdout, _ = execute(t, args)
			assert.Equal(t, ExitInfra, code, stdout)
			res = readResults(t, partial)
			assert.Contains(t, strings.Join(res.InvalidReasons, "\n"), fmt.Sprintf("shard 2 of %d missing", n))
		})
	}
}

// TestMergeRefusesIncompleteShards: a shard that did not finish (its ledger cut before
// run_end), or a shard given twice, makes the merged run invalid with the reason.
func TestMergeRefusesIncompleteShards(t *testing.T) {
	srv := fakeOpenAI(t, 0, nil)
	dirs := runShards(t, e2eScenario(t, false), srv.URL, 2)
	cut := filepath.Join(t.TempDir(), "cut")
	require.NoError(t, os.MkdirAll(cut, 0o755))
	for _, f := range []string{ResolvedFile, ledger.EventsFile} {
		data, err := os.ReadFile(filepath.Join(dirs[1], f))
		require.NoError(t, err)
		if f == ledger.EventsFile {
			lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
			data = []byte(strings.Join(lines[:len(lines)-1], "")) // run_end gone
		}
		require.NoError(t, os.WriteFile(filepath.Join(cut, f), data, 0o644))
	}
	tests := []struct {
		name   string
		dirs   []string
		reason string
	}{
		{"no run_end", []string{dirs[0], cut}, "shard 2 (" + filepath.Join(cut, ledger.EventsFile) + "): incomplete ledger"},
		{"shard given twice", []string{dirs[0], dirs[0], dirs[1]}, "shard 1 given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "merged")
			code, stdout, _ := execute(t, append(append([]string{"merge"}, tt.dirs...), "--out", out, "-q"))
			assert.Equal(t, ExitInfra, code, stdout)
			assert.Contains(t, strings.Join(readResults(t, out).InvalidReasons, "\n"), tt.reason)
		})
	}
}

func TestShardFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"index out of range", []string{"--shard", "5/4"}, "1 <= i <= n"},
		{"not i/n", []string{"--shard", "2"}, "want i/n"},
		{"bad start", []string{"--shard", "1/2", "--shard-start", "tomorrow"}, "RFC 3339"},
		{"start without shard", []string{"--shard-start", "2026-01-02T15:04:05Z"}, "needs --shard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := execute(t, append([]string{"run", "smoke", "--out", t.TempDir()}, tt.args...), WithRunner((&fakeRunner{}).run))
			assert.Equal(t, ExitUsage, code)
			assert.Contains(t, stderr, tt.want)
		})
	}
}
