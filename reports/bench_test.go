package reports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"pdsoak/ledger"
	"testing"
	"time"
)

// benchLedger is a synthetic ledger of n requests (scheduled, sent, first_token, done).
func benchLedger(n int) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_ = enc.Encode(ledger.Event{Time: t, Type: ledger.EventRunStart, Scenario: "bench", Seed: 1})
	outs := []ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeOK, ledger.OutcomeOK, ledger.OutcomeRejected, ledger.OutcomeOK, ledger.OutcomeStalled}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("r%06d", i)
		s := t.Add(time.Duration(i) * time.Millisecond)
		_ = enc.Encode(ledger.Event{Time: s, Type: ledger.EventScheduled, RequestID: id, Workload: "w"})
		_ = enc.Encode(ledger.Event{Time: s, Type: ledger.EventSent, RequestID: id, Scheduled: &s, Lag: 0.0001})
		_ = enc.Encode(ledger.Event{Time: s.Add(50 * time.Millisecond), Type: ledger.EventFirstToken, RequestID: id, TTFT: 0.05})
		_ = enc.Encode(ledger.Event{Time: s.Add(200 * time.Millisecond), Type: ledger.EventDone, RequestID: id, Workload: "w", Scheduled: &s,
			Outcome: outs[i%len(outs)], TTFT: 0.05, E2E: 0.2, ITL: []float64{0.01, 0.012, 0.011, 0.013}})
	}
	return buf.Bytes()
}

// BenchmarkCompute reads and judges a 20,000-request ledger, reported as a ratio against a
// baseline that only splits lines and decodes them (ratio ~1 means the judging is free).
func BenchmarkCompute(b *testing.B) {
	data := benchLedger(20000)
	cfg := Config{Assertions: []string{AssertNoSilentDrops, AssertValidResponses, "p99(ttft) < 1s", AssertRecovery}}
	var base, ours time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e ledger.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				b.Fatal(err)
			}
		}
		base += time.Since(t0)
		t1 := time.Now()
		bl := NewBuilder(cfg)
		if _, err := ledger.Read(bytes.NewReader(data), func(e ledger.Event) error { bl.Add(e); return nil }); err != nil {
			b.Fatal(err)
		}
		if r := bl.Results(); r.Requests != 20000 {
			b.Fatalf("requests %d", r.Requests)
		}
		ours += time.Since(t1)
	}
	b.ReportMetric(float64(ours)/float64(base), "x-decode-only")
	b.ReportMetric(float64(len(data))*float64(b.N)/ours.Seconds()/1e6, "MB/s")
}
