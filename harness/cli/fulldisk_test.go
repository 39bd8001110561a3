package cli

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mkdir(p string) error { return os.MkdirAll(p, 0o755) }

// A run whose disk fills up stops at once, invalid (exit 3), and says the ledger could
// not be written. It drove load to the end of its duration (a nightly soak: hours)
// with every event lost, and then named only results.json.
func TestRunStopsWhenTheLedgerCannotBeWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real harness")
	}
	dir := t.TempDir()
	tiny := filepath.Join(dir, "tiny")
	require.NoError(t, mkdir(tiny))
	if err := syscall.Mount("tmpfs", tiny, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("SKIPPED, not passed: cannot mount a small tmpfs here (%v): needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(tiny, syscall.MNT_DETACH) })

	srv := fakeOpenAI(t, 0, nil)
	sc := writeFile(t, dir, "long.yaml", `name: long
duration: 60s
workloads:
  - name: steady
    type: open_loop
    max_tokens: 3
    pacer: {type: constant, rate: 200}
deadlines: {connect: 5s, first_token: 5s, stall: 5s, total: 10s}
self_check: {max_lag: 30s}
assertions: [no_silent_drops]
`)
	start := time.Now()
	code, stdout, stderr := execute(t, []string{"run", sc, "--target", srv.URL, "--out", filepath.Join(tiny, "out"), "-q"},
		WithRunner(harnessRun))
	took := time.Since(start)
	assert.Equal(t, ExitInfra, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stderr, "events.jsonl: no space left on device", "the ledger's failure is named")
	assert.NotContains(t, stderr, "fell behind", "the requests never sent are not blamed on the harness's lag")
	assert.Less(t, took, 45*time.Second, "stopped when the ledger failed, not at the end of its 60s")
	st, err := os.Stat(filepath.Join(tiny, "out", "events.jsonl"))
	require.NoError(t, err)
	assert.Positive(t, st.Size(), "the run started and wrote events before the disk filled")
}
