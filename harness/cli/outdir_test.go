package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// An --out that already holds a run is refused (exit 2) and left as it was; --force
// empties it first, so nothing of the earlier run (a forensics bundle) survives.
func TestOutHoldingARunNeedsForce(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK})}
	code, _, stderr := execute(t, []string{"run", "smoke", "--out", out}, WithRunner(r.run))
	require.Equal(t, ExitPass, code, stderr)
	stale := filepath.Join(out, "forensics", "first-drop-3s", "MANIFEST.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(stale), 0o755))
	require.NoError(t, os.WriteFile(stale, []byte("{}"), 0o644))

	code, _, stderr = execute(t, []string{"run", "smoke", "--out", out}, WithRunner(r.run))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr, "already holds a run (events.jsonl)")
	assert.Contains(t, stderr, "--force")
	assert.FileExists(t, stale, "a refused run must not touch the directory")

	code, _, stderr = execute(t, []string{"run", "smoke", "--out", out, "--force"}, WithRunner(r.run))
	assert.Equal(t, ExitPass, code, stderr)
	assert.NoFileExists(t, stale)
	assert.FileExists(t, filepath.Join(out, ledger.EventsFile))

	// A directory with no run in it is used as it is.
	other := t.TempDir()
	keep := filepath.Join(other, "notes.txt")
	require.NoError(t, os.WriteFile(keep, []byte("mine"), 0o644))
	code, _, stderr = execute(t, []string{"run", "smoke", "--out", other, "--force"}, WithRunner(r.run))
	assert.Equal(t, ExitPass, code, stderr)
	assert.FileExists(t, keep)
}
