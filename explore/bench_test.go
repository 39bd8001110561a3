package explore

import (
	"context"
	"testing"
)

// BenchmarkSearchPerRun is explore's own cost per run (draw, render, strict load, a
// run directory, the fake's ledger of ~100-1000 requests, reports' verdict), to set
// against the simulator's time per run.
func BenchmarkSearchPerRun(b *testing.B) {
	sc, err := parseWedge(wedgeScenario)
	if err != nil {
		b.Fatal(err)
	}
	fake := &fakeSim{}
	b.ResetTimer()
	rep, err := Search(context.Background(), sc, Options{Run: fake.run, Runs: b.N, Parallel: 1, Seed: 1, OutDir: b.TempDir(), NoShrink: true, FaultTypes: testFaultTypes()})
	if err != nil {
		b.Fatal(err)
	}
	if rep.Runs != b.N {
		b.Fatalf("%d runs, want %d", rep.Runs, b.N)
	}
}
