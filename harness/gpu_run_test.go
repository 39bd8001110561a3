package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// Every run states once, before load starts, whether it has GPU telemetry; on a
// machine without NVML that is a note, not an error, and the run is unaffected.
func TestRunStatesGPUTelemetry(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 300*time.Millisecond, scenarios.Workload{Name: "b", Type: "burst", Count: 2})
	dir := t.TempDir()
	if err := Run(context.Background(), sc, Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	var lines []ledger.Event
	loadStarted := false
	for _, ev := range readLedger(t, dir) {
		if ev.Type == ledger.EventLog && strings.HasPrefix(ev.Message, "load started") {
			loadStarted = true
		}
		if ev.Type == ledger.EventLog && ev.Source == ledger.GPUSource {
			if loadStarted {
				t.Errorf("GPU telemetry line after load started: %+v", ev)
			}
			lines = append(lines, ev)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d GPU telemetry lines, want 1: %+v", len(lines), lines)
	}
	l := lines[0]
	if !strings.HasPrefix(l.Message, "GPU telemetry: ") && !strings.HasPrefix(l.Message, "no GPU telemetry: ") {
		t.Errorf("GPU line %q says neither", l.Message)
	}
	if strings.HasPrefix(l.Message, "no GPU telemetry: ") && strings.Contains(l.Message, "not found") && l.Error != "" {
		t.Errorf("a machine without NVML is informational, got error %q", l.Error)
	}
	t.Log(l.Message)
}
