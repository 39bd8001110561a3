package telemetry

import (
	"errors"
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
	open := func(observe func(ledger.Event)) *ledger.Writer {
		w, err := ledger.Create(filepath.Join(b.TempDir(), "events.jsonl"), observe)
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	m := NewMetrics(Labels{Scenario: "bench"}, false)
	plain, observed := open(nil), open(m.Observe)
	// Interleaved blocks, so a busy moment of a shared machine hits both sides alike.
	const block = 1000
	var base, with time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		t := time.Now()
		for range n {
			plain.Emit(ev)
		}
		base += time.Since(t)
		t = time.Now()
		for range n {
			observed.Emit(ev)
		}
		with += time.Since(t)
	}
	b.StopTimer()
	if err := errors.Join(plain.Close(), observed.Close()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(with)/float64(base), "x-ledger-only")
	b.ReportMetric(float64(with-base)/float64(b.N), "ns-added/event")
}
