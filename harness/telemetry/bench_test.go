package telemetry

import (
	"path/filepath"
	"testing"
	"time"

	"pdsoak/ledger"
)

// BenchmarkObserveOverhead: the cost the metrics add to writing the ledger, as a ratio
// measured in the same run (ledger+metrics time / ledger-only time, per done event with
// 20 inter-token gaps). The ledger's own encoding dominates; the metrics should not.
func BenchmarkObserveOverhead(b *testing.B) {
	ev := ledger.Event{Type: ledger.EventDone, RequestID: "agents-s001-t001", Workload: "agents",
		Outcome: ledger.OutcomeOK, TTFT: 0.2, E2E: 1.3, ITL: make([]float64, 20), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	for i := range ev.ITL {
		ev.ITL[i] = 0.03
	}
	run := func(observe func(ledger.Event)) time.Duration {
		w, err := ledger.Create(filepath.Join(b.TempDir(), "events.jsonl"), observe)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for range b.N {
			w.Emit(ev)
		}
		d := time.Since(start)
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	m := NewMetrics(Labels{Scenario: "bench"}, false)
	b.ResetTimer()
	base := run(nil)
	with := run(m.Observe)
	b.ReportMetric(float64(with)/float64(base), "x-ledger-only")
	b.ReportMetric(float64(with-base)/float64(b.N), "ns-added/event")
}
