package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// Every run states once, before load starts, whether it has GPU telemetry; on a
// machine without NVML that is informational, not an error, and the run is unaffected.
// When the machine has NVIDIA device nodes (here: a fake glob) and no telemetry, the
// run also writes a note for the console.
func TestRunStatesGPUTelemetry(t *testing.T) {
	devDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(devDir, "nvidia0"), nil, 0o644))
	tests := []struct {
		name string
		glob string
	}{
		{"no NVIDIA devices", filepath.Join(devDir, "absent*")},
		{"NVIDIA devices", filepath.Join(devDir, "nvidia*")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBadServer(t, []string{"ok"})
			sc := testScenario(b.srv.URL, 300*time.Millisecond, scenarios.Workload{Name: "b", Type: "burst", Count: 2})
			dir := t.TempDir()
			require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, NVIDIADevices: tt.glob}))
			var lines, notes []ledger.Event
			loadStarted := false
			for _, ev := range readLedger(t, dir) {
				if ev.Type == ledger.EventLog && strings.HasPrefix(ev.Message, "load started") {
					loadStarted = true
				}
				if ev.Source != ledger.GPUSource || ev.Type == ledger.EventSample {
					continue
				}
				assert.False(t, loadStarted, "GPU telemetry line after load started: %+v", ev)
				switch ev.Type {
				case ledger.EventLog:
					lines = append(lines, ev)
				case ledger.EventNote:
					notes = append(notes, ev)
				}
			}
			require.Len(t, lines, 1, "GPU telemetry lines")
			l := lines[0]
			t.Log(l.Message)
			available := strings.HasPrefix(l.Message, "GPU telemetry: ")
			require.True(t, available || strings.HasPrefix(l.Message, "no GPU telemetry: "), "GPU line %q says neither", l.Message)
			if !available && strings.Contains(l.Message, "not found") {
				assert.Empty(t, l.Error, "a machine without NVML is informational")
			}
			if available || tt.glob == filepath.Join(devDir, "absent*") {
				assert.Empty(t, notes)
				return
			}
			require.Len(t, notes, 1)
			assert.Contains(t, notes[0].Message, filepath.Join(devDir, "nvidia0"))
			assert.Contains(t, notes[0].Message, strings.TrimPrefix(l.Message, "no GPU telemetry: "))
		})
	}
}
