package cli

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/k8s"
)

func TestK8sRender(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "name: bad\nworkloads:\n  - type: agents\n    agnets: 3\n")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains []string
		stderr   string
	}{
		{name: "embedded scenario", args: []string{"k8s", "render", "smoke", "--shards", "2", "--image", "pdsoak:dev"}, code: ExitPass,
			contains: []string{"completionMode: Indexed", "parallelism: 2", "kind: ConfigMap", "kind: PersistentVolumeClaim", "wait-shards", "/shard-2\n"}},
		{name: "target and volume", args: []string{"k8s", "render", "smoke", "--shards", "3", "--image", "i", "--target", "http://pdsoak-router.soak.svc:30000", "--metrics-url", "http://pdsoak-router.soak.svc:30000/metrics", "--out-volume", "mine", "--namespace", "soak"}, code: ExitPass,
			contains: []string{"- http://pdsoak-router.soak.svc:30000\n", "- http://pdsoak-router.soak.svc:30000/metrics\n", "claimName: mine", "namespace: soak"}},
		{name: "target without metrics", args: []string{"k8s", "render", "smoke", "--shards", "1", "--image", "i", "--target", "http://r:30000"}, code: ExitUsage, stderr: "no_leaks"},
		{name: "no shards", args: []string{"k8s", "render", "smoke", "--image", "i"}, code: ExitUsage, stderr: "--shards"},
		{name: "zero shards", args: []string{"k8s", "render", "smoke", "--shards", "0", "--image", "i"}, code: ExitUsage, stderr: "--shards"},
		{name: "no image", args: []string{"k8s", "render", "smoke", "--shards", "1"}, code: ExitUsage, stderr: "--image"},
		{name: "object store path", args: []string{"k8s", "render", "smoke", "--shards", "1", "--image", "i", "--out-path", "s3://b/p"}, code: ExitUsage, stderr: "--out-volume"},
		{name: "bad cpu", args: []string{"k8s", "render", "smoke", "--shards", "1", "--image", "i", "--cpu", "lots"}, code: ExitUsage, stderr: "--cpu"},
		{name: "bad scenario", args: []string{"k8s", "render", bad, "--shards", "1", "--image", "i"}, code: ExitUsage, stderr: "agnets"},
		{name: "missing scenario", args: []string{"k8s", "render", filepath.Join(dir, "nope.yaml"), "--shards", "1", "--image", "i"}, code: ExitUsage, stderr: "neither a file nor an embedded scenario"},
		{name: "reference", args: []string{"k8s", "render-reference", "--image", "i", "--prefill", "2", "--semantics", "sglang"}, code: ExitPass,
			contains: []string{"pdsoak-prefill-1", "--prefill-bootstrap", "kind: Service", "path: /health"}},
		{name: "reference bad semantics", args: []string{"k8s", "render-reference", "--image", "i", "--semantics", "loose"}, code: ExitUsage, stderr: "--semantics"},
		{name: "bare k8s", args: []string{"k8s"}, code: ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := execute(t, tc.args)
			require.Equal(t, tc.code, code, "stderr: %s", errOut)
			for _, s := range tc.contains {
				assert.Contains(t, out, s)
			}
			assert.Contains(t, errOut, tc.stderr)
		})
	}
}

// fakeExec replaces the in-process harness run of `k8s shard`.
func fakeExec(t *testing.T, code int) *[]string {
	t.Helper()
	var got []string
	old := execArgs
	execArgs = func(_ *app, _ context.Context, args []string, _, _ io.Writer) int {
		got = args
		return code
	}
	t.Cleanup(func() { execArgs = old })
	return &got
}

func TestK8sShard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		index  string
		runs   int // the run's exit code
		code   int // the shard command's
		marker bool
	}{
		{name: "pass", index: "2", runs: ExitPass, code: ExitPass, marker: true},
		{name: "fail verdict completes the shard", index: "0", runs: ExitFail, code: ExitPass, marker: true},
		{name: "invalid run is retried", index: "3", runs: ExitInfra, code: ExitInfra},
		{name: "bad scenario", index: "1", runs: ExitUsage, code: ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			got := fakeExec(t, tc.runs)
			t.Setenv("JOB_COMPLETION_INDEX", tc.index)
			i := map[string]int{"0": 1, "1": 2, "2": 3, "3": 4}[tc.index]
			// A failed earlier attempt's leftovers are removed first.
			stale := k8s.MarkerPath(root, i)
			require.NoError(t, os.WriteFile(stale, []byte("{}"), 0o644))
			require.NoError(t, os.MkdirAll(filepath.Join(k8s.ShardDir(root, i), "old"), 0o755))

			code, _, errOut := execute(t, []string{"k8s", "shard", "--shards", "4", "--out-root", root, "--", "/scenario/scenario.yaml", "--target", "http://r:30000"},
				WithClock(func() time.Time { return time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC) }))
			require.Equal(t, tc.code, code, errOut)
			shard := filepath.Join(root, "shard-"+[]string{"", "1", "2", "3", "4"}[i])
			assert.Equal(t, []string{"run", "/scenario/scenario.yaml", "--shard", []string{"", "1", "2", "3", "4"}[i] + "/4", "--out", shard, "--target", "http://r:30000"}, *got)
			assert.NoDirExists(t, filepath.Join(shard, "old"))
			b, err := os.ReadFile(k8s.MarkerPath(root, i))
			if !tc.marker {
				require.ErrorIs(t, err, os.ErrNotExist, "no marker: the merge must not start on this attempt")
				return
			}
			require.NoError(t, err)
			var m shardMarker
			require.NoError(t, json.Unmarshal(b, &m))
			assert.Equal(t, shardMarker{Shard: i, Of: 4, Exit: tc.runs, Finished: time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)}, m)
		})
	}
}

func TestK8sShardIndex(t *testing.T) {
	for name, index := range map[string]string{"not a number": "x", "negative": "-1", "out of range": "4"} {
		t.Run(name, func(t *testing.T) {
			got := fakeExec(t, ExitPass)
			t.Setenv("JOB_COMPLETION_INDEX", index)
			code, _, errOut := execute(t, []string{"k8s", "shard", "--shards", "4", "--out-root", t.TempDir(), "--", "s.yaml"})
			assert.Equal(t, ExitUsage, code)
			assert.Contains(t, errOut, "JOB_COMPLETION_INDEX")
			assert.Nil(t, *got, "nothing ran")
		})
	}
	t.Run("unset", func(t *testing.T) {
		got := fakeExec(t, ExitPass)
		code, _, errOut := execute(t, []string{"k8s", "shard", "--shards", "4", "--index-env", "PDSOAK_TEST_UNSET_INDEX", "--", "s.yaml"})
		assert.Equal(t, ExitUsage, code)
		assert.Contains(t, errOut, "not set")
		assert.Nil(t, *got)
	})
}

func TestK8sWaitShards(t *testing.T) {
	t.Run("missing shards time out", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.WriteFile(k8s.MarkerPath(root, 2), []byte("{}"), 0o644))
		code, _, errOut := execute(t, []string{"k8s", "wait-shards", "--out-root", root, "--shards", "3", "--timeout", "300ms", "--poll", "20ms"})
		assert.Equal(t, ExitInfra, code)
		assert.Contains(t, errOut, "1 of 3 shards done")
		assert.Contains(t, errOut, "shards 1, 3 have no marker")
	})
	t.Run("markers arrive", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.WriteFile(k8s.MarkerPath(root, 1), []byte("{}"), 0o644))
		type result struct {
			code   int
			stderr string
		}
		done := make(chan result, 1)
		go func() {
			code, _, errOut := execute(t, []string{"k8s", "wait-shards", "--out-root", root, "--shards", "2", "--timeout", "60s", "--poll", "10ms"})
			done <- result{code, errOut}
		}()
		select {
		case r := <-done:
			t.Fatalf("returned before every marker existed: %d %s", r.code, r.stderr)
		case <-time.After(200 * time.Millisecond): // still waiting, as it must
		}
		require.NoError(t, os.WriteFile(k8s.MarkerPath(root, 2), []byte("{}"), 0o644))
		select {
		case r := <-done:
			assert.Equal(t, ExitPass, r.code, r.stderr)
			assert.Contains(t, r.stderr, "2 of 2 shards done")
		case <-time.After(30 * time.Second):
			t.Fatal("wait-shards did not see the last marker")
		}
	})
	t.Run("bad flags", func(t *testing.T) {
		code, _, _ := execute(t, []string{"k8s", "wait-shards", "--shards", "0"})
		assert.Equal(t, ExitUsage, code)
	})
}
