package reports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"pdsoak/ledger"
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

// soakLedger is a synthetic 4-hour soak ledger of about n events: requests (scheduled,
// sent, first_token, done) at a steady rate, gauge samples from three processes and GPU
// samples every second, a fault every 20 minutes and a silent drop every 997 requests.
func soakLedger(n int) (data []byte, events int) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	emit := func(e ledger.Event) { _ = enc.Encode(e); events++ }
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const dur = 4 * time.Hour
	secs := int(dur / time.Second)
	emit(ledger.Event{Time: t, Type: ledger.EventRunStart, Scenario: "soak-bench", Seed: 1})
	fixed := secs*(3+1) + 12*3 + 2 // samples, faults, run_start/end
	reqs := (n - fixed) / 4
	every := dur / time.Duration(reqs)
	u, mu, mt := 55.0, uint64(60<<30), uint64(141<<30)
	outs := []ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeOK, ledger.OutcomeOK, ledger.OutcomeRejected, ledger.OutcomeOK}
	next := 0 // next sample second
	for i := range reqs {
		s := t.Add(time.Duration(i) * every)
		for ; next < secs && t.Add(time.Duration(next)*time.Second).Before(s); next++ {
			at := t.Add(time.Duration(next) * time.Second)
			for _, p := range []string{"router", "prefill-0", "decode-0"} {
				emit(ledger.Event{Time: at, Type: ledger.EventSample, Source: p, Metrics: map[string]float64{
					"sglang:num_running_reqs": float64(next % 17), "sglang:num_queue_reqs": float64(next % 5), "sglang:token_usage": float64(next%100) / 100}})
			}
			emit(ledger.Event{Time: at, Type: ledger.EventSample, Source: ledger.GPUSource, InFlight: 3,
				GPUs: []ledger.GPU{{Index: 0, Util: &u, MemUsed: &mu, MemTotal: &mt}}})
			if next%1200 == 600 {
				name := fmt.Sprintf("f%d", next/1200)
				emit(ledger.Event{Time: at, Type: ledger.EventFaultStart, Fault: name, FaultType: "process_kill", Target: "decode-0"})
				emit(ledger.Event{Time: at.Add(30 * time.Millisecond), Type: ledger.EventFaultVerified, Fault: name, Passed: ledger.Bool(true)})
			}
			if next%1200 == 660 {
				emit(ledger.Event{Time: at, Type: ledger.EventFaultStop, Fault: fmt.Sprintf("f%d", next/1200)})
			}
		}
		id := fmt.Sprintf("r%07d", i)
		o := outs[i%len(outs)]
		if i%997 == 0 {
			o = ledger.OutcomeStalled
		}
		emit(ledger.Event{Time: s, Type: ledger.EventScheduled, RequestID: id, Workload: "agents"})
		emit(ledger.Event{Time: s, Type: ledger.EventSent, RequestID: id, Scheduled: &s, Lag: 0.0001})
		emit(ledger.Event{Time: s.Add(50 * time.Millisecond), Type: ledger.EventFirstToken, RequestID: id, TTFT: 0.05})
		emit(ledger.Event{Time: s.Add(200 * time.Millisecond), Type: ledger.EventDone, RequestID: id, Workload: "agents", Scheduled: &s,
			Outcome: o, TTFT: 0.05 + float64(i%7)/100, E2E: 0.2 + float64(i%11)/50, ITL: []float64{0.01, 0.012, 0.011, 0.013}})
	}
	emit(ledger.Event{Time: t.Add(dur), Type: ledger.EventRunEnd})
	return buf.Bytes(), events
}

// BenchmarkReadLedger1M times the reports' ledger reader (decoding spread over the cores)
// against ledger.Read on the same 1,000,000-event ledger in the same run: x-ledger.Read
// below 1 is the win (about 1/GOMAXPROCS at best).
func BenchmarkReadLedger1M(b *testing.B) {
	data, events := soakLedger(1_000_000)
	var theirs, ours time.Duration
	for b.Loop() {
		t0 := time.Now()
		n := 0
		if _, err := ledger.Read(bytes.NewReader(data), func(ledger.Event) error { n++; return nil }); err != nil || n != events {
			b.Fatalf("ledger.Read: %d events, %v", n, err)
		}
		theirs += time.Since(t0)
		t1 := time.Now()
		n = 0
		if _, err := ledger.ReadParallel(bytes.NewReader(data), func(ledger.Event) error { n++; return nil }); err != nil || n != events {
			b.Fatalf("ReadParallel: %d events, %v", n, err)
		}
		ours += time.Since(t1)
	}
	b.ReportMetric(float64(ours)/float64(theirs), "x-ledger.Read")
	b.ReportMetric(theirs.Seconds()/float64(b.N), "ledger.Read-s/op")
	b.ReportMetric(ours.Seconds()/float64(b.N), "readparallel-s/op")
}
