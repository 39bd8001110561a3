package sim

import (
	"context"
	"testing"
	"time"

	"pdsoak/chaos"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// BenchmarkSimSpeedup simulates the incident scenario (silent-drop-sglang: 30 agents
// for 40s) and reports sim_speedup: the virtual time it covered (load, drain, leak
// check) per second of wall time, on the simulated topology.
func BenchmarkSimSpeedup(b *testing.B) {
	var virtual, wall time.Duration
	for b.Loop() {
		sc, err := scenarios.Load("silent-drop-sglang", scenarios.WithFaultTypes(chaos.FaultTypes()))
		if err != nil {
			b.Fatal(err)
		}
		var end time.Time
		start := time.Now()
		err = Run(context.Background(), sc, Options{OutDir: b.TempDir(), OnEvent: func(ev ledger.Event) { end = ev.Time }})
		wall += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		virtual += end.Sub(Epoch)
	}
	b.ReportMetric(virtual.Seconds()/wall.Seconds(), "sim_speedup")
}
