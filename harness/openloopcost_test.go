package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"pdsoak/harness/client"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// BenchmarkOpenLoopCost measures what one open-loop request costs the sending process,
// the harness's path (vegeta's pacing through the classifying client, every event in the
// ledger) and vegeta's own attack, 64 workers each, against a server in a child process
// so that its CPU is not counted: cpu_us/req is this process's CPU time (getrusage, user
// + system) per request and allocs/op (one op is one request) its allocations. CPU time
// moves far less with the machine's load than the rate BenchmarkOpenLoopMaxRate compares,
// so a change to the harness's path is measured here (run both sub-benchmarks in one
// process, and old and new binaries alternately): the harness's figure against vegeta's
// in the same run. `-benchtime 20000x` as a start; profile one side with
// `-bench 'OpenLoopCost/harness' -cpuprofile`.
func BenchmarkOpenLoopCost(b *testing.B) {
	url := startHoldServer(b, 0, 1)[0] // /v1/completions: a short complete stream
	const workers = 64
	b.Run("harness", func(b *testing.B) {
		e, done := newBenchExecutor(b, url, nil)
		defer done()
		sc := &scenarios.Scenario{Name: "cost", Seed: 1, Duration: scenarios.Duration(time.Hour),
			Target: scenarios.Target{URL: url},
			Workloads: []scenarios.Workload{{Name: "ol", Type: "open_loop", Count: b.N, Stream: true, MaxInFlight: workers,
				Endpoint: scenarios.EndpointCompletions, Pacer: &scenarios.Pacer{Type: "constant", Rate: 1e6}}}}
		sc.ApplyDefaults()
		sc.Workloads[0].Stream = true
		w, err := workload.New(sc, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		w.Run(context.Background(), time.Now(), e)
		cpu := processCPU() - cpu0
		b.StopTimer()
		if ok := e.outcomes()[ledger.OutcomeOK]; ok != int64(b.N) {
			b.Fatalf("%d ok of %d (%v)", ok, b.N, e.outcomes())
		}
		b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "cpu_us/req")
	})
	b.Run("vegeta", func(b *testing.B) {
		body, _, _ := client.Body(&client.Request{Model: "ref", Stream: true, MaxTokens: 2,
			Endpoint: client.EndpointCompletions, Prompt: strings.Repeat("x", 32)})
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		_, ok := vegetaMaxRateAt(url, "/v1/completions", body, b.N, workers)
		cpu := processCPU() - cpu0
		b.StopTimer()
		if ok != b.N {
			b.Fatalf("%d ok of %d", ok, b.N)
		}
		b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "cpu_us/req")
	})
}
