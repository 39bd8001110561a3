package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"pdsoak/ledger"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

var goldenConfig = Config{
	Assertions: []string{AssertNoSilentDrops, AssertValidResponses, AssertNoLeaks, AssertRecovery,
		"p99(ttft) < 2s", "rate(rejected) < 0.1", "count(http_error) == 0", "max(e2e) <= 10s"},
	Recovery: RecoveryConfig{Window: 3 * time.Second, Within: 10 * time.Second, Threshold: 0.6},
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reports -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test ./reports -update to accept):\n--- got\n%s", path, got)
	}
}

func goldenResults(t *testing.T) *Results {
	t.Helper()
	res, err := ComputeFile("testdata/events.jsonl", goldenConfig)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestGoldenOutputs(t *testing.T) {
	res := goldenResults(t)
	for _, out := range []struct {
		file  string
		write func(*bytes.Buffer, *Results) error
	}{
		{"results.golden.json", func(b *bytes.Buffer, r *Results) error { return WriteJSON(b, r) }},
		{"junit.golden.xml", func(b *bytes.Buffer, r *Results) error { return WriteJUnit(b, r) }},
		{"summary.golden.md", func(b *bytes.Buffer, r *Results) error { return WriteMarkdown(b, r) }},
		{"table.golden.txt", func(b *bytes.Buffer, r *Results) error { return WriteTable(b, r) }},
	} {
		t.Run(out.file, func(t *testing.T) {
			var buf bytes.Buffer
			if err := out.write(&buf, res); err != nil {
				t.Fatal(err)
			}
			golden(t, out.file, buf.Bytes())
		})
	}
}

func TestGoldenResultsContent(t *testing.T) {
	res := goldenResults(t)
	if res.Verdict != VerdictFail {
		t.Errorf("verdict %s, want fail", res.Verdict)
	}
	if res.Scenario != "golden" || res.Seed != 42 || res.Target != "http://127.0.0.1:30000" {
		t.Errorf("identity: %q %d %q", res.Scenario, res.Seed, res.Target)
	}
	if res.Requests != 20 || res.SilentDrops != 2 || len(res.Drops) != 2 {
		t.Errorf("requests %d silent drops %d details %d", res.Requests, res.SilentDrops, len(res.Drops))
	}
	d := res.Drops[0]
	if d.RequestID != "r009" || d.Phase != ledger.PhaseBeforeFirstToken || d.Age != 3 || !bytes.Contains(d.ServerDebug, []byte("decode_prealloc_queue")) {
		t.Errorf("first drop %+v", d)
	}
	// Every taxonomy key is present in results.json, even with a zero count.
	var raw map[string]any
	var buf bytes.Buffer
	_ = WriteJSON(&buf, res)
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	outs := raw["outcomes"].(map[string]any)
	for _, o := range ledger.Outcomes {
		if _, ok := outs[string(o)]; !ok {
			t.Errorf("outcomes lacks %s", o)
		}
	}
	for _, k := range []string{"verdict", "outcomes", "silent_drops", "assertions", "ttft", "itl", "e2e", "seed", "scenario", "target"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("results.json lacks %q", k)
		}
	}
	want := map[string]bool{
		AssertNoSilentDrops: false, AssertValidResponses: false, AssertNoLeaks: true, AssertRecovery: true,
		"p99(ttft) < 2s": true, "rate(rejected) < 0.1": true, "count(http_error) == 0": false, "max(e2e) <= 10s": true,
	}
	for _, a := range res.Assertions {
		if w, ok := want[a.Name]; !ok || w != a.Passed {
			t.Errorf("assertion %s passed=%v (%s), want %v", a.Name, a.Passed, a.Detail, w)
		}
	}
	f := res.Faults[0]
	if f.Recovered == nil || !*f.Recovered || f.TimeToRecover == nil {
		t.Fatalf("fault %+v did not recover", f)
	}
	// Fault stopped at 12 s; requests scheduled at 12, 13, 14 s are deadline_exceeded, ok,
	// ok: 2 of 3 reach the 0.6 threshold at once.
	if *f.TimeToRecover != 0 {
		t.Errorf("time to recover %v, want 0", *f.TimeToRecover)
	}
	// JUnit parses and has one case per assertion.
	buf.Reset()
	_ = WriteJUnit(&buf, res)
	var ju junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &ju); err != nil {
		t.Fatal(err)
	}
	if len(ju.Suites[0].Cases) != len(res.Assertions) || ju.Failures != 3 {
		t.Errorf("junit: %d cases, %d failures", len(ju.Suites[0].Cases), ju.Failures)
	}
}

func ev(typ ledger.EventType, sec float64, mod func(*ledger.Event)) ledger.Event {
	e := ledger.Event{Type: typ, Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sec * float64(time.Second)))}
	if mod != nil {
		mod(&e)
	}
	return e
}

func done(id string, sec float64, o ledger.Outcome) ledger.Event {
	return ev(ledger.EventDone, sec, func(e *ledger.Event) { e.RequestID = id; e.Outcome = o; e.E2E = 0.1 })
}

func TestVerdicts(t *testing.T) {
	base := []ledger.Event{ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "v" })}
	tests := []struct {
		name   string
		events []ledger.Event
		cfg    Config
		want   Verdict
		reason string
	}{
		{"all ok", append(base, done("a", 1, ledger.OutcomeOK), done("b", 2, ledger.OutcomeRejected)), Config{}, VerdictPass, ""},
		{"silent drop fails", append(base, done("a", 1, ledger.OutcomeOK), done("b", 2, ledger.OutcomeStalled)), Config{}, VerdictFail, ""},
		{"explicit errors are valid", append(base, done("a", 1, ledger.OutcomeStreamError), done("b", 2, ledger.OutcomeHTTPError)), Config{}, VerdictPass, ""},
		{"invalid body fails", append(base, done("a", 1, ledger.OutcomeInvalid)), Config{}, VerdictFail, ""},
		{"no requests is invalid", base, Config{}, VerdictInvalid, "no request"},
		{"self-check failure is invalid", append(base, done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventSelfCheck, 3, func(e *ledger.Event) { e.Passed = ledger.Bool(false); e.Detail = "p99 lag 900ms" })), Config{}, VerdictInvalid, "self-check"},
		{"unverified fault is invalid", append(base, done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventFaultStart, 1, func(e *ledger.Event) { e.Fault = "f" }),
			ev(ledger.EventFaultVerified, 1, func(e *ledger.Event) { e.Fault = "f"; e.Passed = ledger.Bool(false); e.Detail = "no hits" })), Config{}, VerdictInvalid, "did not take effect"},
		{"unresolved request is invalid", append(base, done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventScheduled, 1, func(e *ledger.Event) { e.RequestID = "b" })), Config{}, VerdictInvalid, "no terminal outcome"},
		{"duplicate terminal is invalid", append(base, done("a", 1, ledger.OutcomeOK), done("a", 2, ledger.OutcomeOK)), Config{}, VerdictInvalid, "more than one"},
		{"run error is invalid", append(base, done("a", 1, ledger.OutcomeOK), ev(ledger.EventRunEnd, 3, func(e *ledger.Event) { e.Error = "router died" })), Config{}, VerdictInvalid, "router died"},
		{"no leak check fails no_leaks", append(base, done("a", 1, ledger.OutcomeOK)), Config{Assertions: []string{AssertNoLeaks}}, VerdictFail, ""},
		{"leak check failed", append(base, done("a", 1, ledger.OutcomeOK), ev(ledger.EventLeakCheck, 2, func(e *ledger.Event) {
			e.Passed = ledger.Bool(false)
			e.Metrics = map[string]float64{"sglang:num_queue_reqs": 3}
		})), Config{Assertions: []string{AssertNoLeaks}}, VerdictFail, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Compute(tt.events, tt.cfg)
			if res.Verdict != tt.want {
				t.Errorf("verdict %s, want %s (assertions %+v, invalid %v)", res.Verdict, tt.want, res.Assertions, res.InvalidReasons)
			}
			if tt.reason != "" && !strings.Contains(strings.Join(res.InvalidReasons, "\n"), tt.reason) {
				t.Errorf("invalid reasons %v lack %q", res.InvalidReasons, tt.reason)
			}
		})
	}
}

func TestRecovery(t *testing.T) {
	fault := []ledger.Event{
		ev(ledger.EventRunStart, 0, nil),
		ev(ledger.EventFaultStart, 1, func(e *ledger.Event) { e.Fault = "f"; e.FaultType = "decode_crash" }),
		ev(ledger.EventFaultStop, 10, func(e *ledger.Event) { e.Fault = "f" }),
	}
	sched := func(id string, sec float64, o ledger.Outcome) ledger.Event {
		e := done(id, sec+0.5, o)
		s := ev(ledger.EventScheduled, sec, nil).Time
		e.Scheduled = &s
		return e
	}
	tests := []struct {
		name      string
		events    []ledger.Event
		recovered *bool
		ttr       float64
		passed    bool
	}{
		{"immediate", []ledger.Event{sched("a", 10, ledger.OutcomeOK), sched("b", 11, ledger.OutcomeOK), sched("c", 12, ledger.OutcomeOK)}, ledger.Bool(true), 0, true},
		{"after errors", []ledger.Event{sched("a", 10, ledger.OutcomeHTTPError), sched("b", 11, ledger.OutcomeHTTPError), sched("c", 13, ledger.OutcomeOK),
			sched("d", 14, ledger.OutcomeOK), sched("e", 15, ledger.OutcomeOK)}, ledger.Bool(true), 3, true},
		{"never", []ledger.Event{sched("a", 10, ledger.OutcomeHTTPError), sched("b", 15, ledger.OutcomeHTTPError), sched("c", 20, ledger.OutcomeOK),
			sched("d", 45, ledger.OutcomeOK), sched("e", 46, ledger.OutcomeOK), sched("f", 47, ledger.OutcomeOK)}, ledger.Bool(false), 0, false},
		{"requests during the fault do not count", []ledger.Event{sched("a", 5, ledger.OutcomeStalled), sched("b", 10, ledger.OutcomeOK)}, ledger.Bool(true), 0, true},
		{"not measurable", []ledger.Event{sched("a", 5, ledger.OutcomeOK)}, nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Compute(append(append([]ledger.Event{}, fault...), tt.events...), Config{Assertions: []string{AssertRecovery},
				Recovery: RecoveryConfig{Window: 3 * time.Second, Within: 30 * time.Second, Threshold: 0.9}})
			f := res.Faults[0]
			if (f.Recovered == nil) != (tt.recovered == nil) || (f.Recovered != nil && *f.Recovered != *tt.recovered) {
				t.Fatalf("recovered %v, want %v", optBool(f.Recovered), optBool(tt.recovered))
			}
			if f.TimeToRecover != nil && *f.TimeToRecover != tt.ttr {
				t.Errorf("time to recover %v, want %v", *f.TimeToRecover, tt.ttr)
			}
			if res.Assertions[0].Passed != tt.passed {
				t.Errorf("recovery passed=%v, want %v: %s", res.Assertions[0].Passed, tt.passed, res.Assertions[0].Detail)
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i)
	}
	p := percentiles(xs)
	if p.P50 != 50 || p.P90 != 90 || p.P99 != 99 || p.Max != 100 || p.Mean != 50.5 || p.Count != 100 {
		t.Errorf("%+v", p)
	}
	if (percentiles(nil) != Percentiles{}) {
		t.Error("empty percentiles")
	}
}

func TestReadTornLastLine(t *testing.T) {
	data, err := os.ReadFile("testdata/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := ledger.ReadAll(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		input []byte
		n     int
		torn  bool
		err   bool
	}{
		{"complete", data, len(full), false, false},
		{"torn mid-line", append(append([]byte{}, data...), []byte(`{"time":"2026-12-02T10:00:30Z","type":"do`)...), len(full), true, false},
		{"last line without newline but whole", bytes.TrimSuffix(data, []byte("\n")), len(full), false, false},
		{"blank lines", append([]byte("\n\n"), data...), len(full), false, false},
		{"bad middle line", append([]byte("{nope\n"), data...), 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, st, err := ledger.ReadAll(bytes.NewReader(tt.input))
			if (err != nil) != tt.err {
				t.Fatalf("err %v", err)
			}
			if tt.err {
				if !strings.Contains(err.Error(), "line 1") {
					t.Errorf("error lacks the line number: %v", err)
				}
				return
			}
			if len(evs) != tt.n || st.Torn != tt.torn {
				t.Errorf("got %d events torn=%v, want %d torn=%v", len(evs), st.Torn, tt.n, tt.torn)
			}
		})
	}
}

func TestParseAssertion(t *testing.T) {
	tests := []struct {
		in, name string
		value    float64
		err      string
	}{
		{"no_silent_drops", "no_silent_drops", 0, ""},
		{" recovery ", "recovery", 0, ""},
		{"p99(ttft) < 2s", "p99(ttft) < 2s", 2, ""},
		{"p50( itl )<=250ms", "p50(itl) <= 250ms", 0.25, ""},
		{"mean(e2e) > 1.5", "mean(e2e) > 1.5s", 1.5, ""},
		{"max(e2e) != 0s", "max(e2e) != 0s", 0, ""},
		{"rate(rejected) < 0.1", "rate(rejected) < 0.1", 0.1, ""},
		{"rate(silent_drops) == 0", "rate(silent_drops) == 0", 0, ""},
		{"count(stalled) == 0", "count(stalled) == 0", 0, ""},
		{"count(ok) >= 100", "count(ok) >= 100", 100, ""},
		{"p99(ttfb) < 2s", "", 0, "takes ttft, itl or e2e"},
		{"p95(ttft) < 2s", "", 0, "unknown function"},
		{"rate(bogus) < 1", "", 0, "takes an outcome"},
		{"rate(ok) > 1.5", "", 0, "fraction"},
		{"count(ok) > 1.5", "", 0, "whole number"},
		{"p99(ttft) 2s", "", 0, "want an operator"},
		{"p99(ttft) <", "", 0, "missing value"},
		{"p99(ttft < 2s", "", 0, "missing ')'"},
		{"p99(ttft) < soon", "", 0, "not a duration"},
		{"no_silent_drop", "", 0, "unknown assertion"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAssertion(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Name != tt.name || a.Value != tt.value {
				t.Errorf("got %q value %v", a.Name, a.Value)
			}
		})
	}
}

func FuzzParseAssertion(f *testing.F) {
	for _, s := range []string{"p99(ttft) < 2s", "rate(rejected) < 0.1", "count(stalled) == 0", "no_leaks", "max(e2e)>=1e3", "p50(itl) != 0.5", "(((", "rate() <"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAssertion(s)
		if err != nil {
			return
		}
		// The normalised form parses back to the same assertion.
		b, err := ParseAssertion(a.String())
		if err != nil {
			t.Fatalf("normalised %q does not parse: %v", a.String(), err)
		}
		if a.Builtin() != b.Builtin() || a.Func != b.Func || a.Arg != b.Arg || a.Op != b.Op {
			t.Fatalf("round trip %q -> %q changed it", s, a.String())
		}
	})
}

func FuzzRead(f *testing.F) {
	data, _ := os.ReadFile("testdata/events.jsonl")
	f.Add(data)
	f.Add([]byte("{\"type\":\"done\"}\n{\"ty"))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		b := NewBuilder(Config{Assertions: []string{AssertNoSilentDrops, AssertRecovery, "p99(ttft) < 1s"}})
		_, _ = ledger.Read(bytes.NewReader(in), func(e ledger.Event) error { b.Add(e); return nil })
		r := b.Results()
		total := 0
		for _, o := range ledger.Outcomes {
			total += r.Outcomes[o]
		}
		if total != r.Requests || len(r.Outcomes) != len(ledger.Outcomes) {
			t.Fatalf("outcome counts inconsistent: %v vs %d", r.Outcomes, r.Requests)
		}
	})
}

func TestHeldAt(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"harness shape", `{"where":"x","sources":[{"process":"decode-0","entries":[{"id":"a","stage":"prealloc"}]},{"process":"router","found":false}]}`, "decode-0: prealloc"},
		{"bare entry", `{"id":"a","stage":"transfer"}`, "transfer"},
		{"nothing known", `{"id":"a"}`, ""},
		{"not json", `nope`, ""},
		{"empty", ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(heldAt(json.RawMessage(tt.raw)), ","); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
