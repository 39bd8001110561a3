package reports

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports/internal/fixture"
)

// ev and done build one event of a test ledger (package fixture).
var ev, done = fixture.Ev, fixture.Done

var update = flag.Bool("update", false, "rewrite golden files")

var goldenConfig = Config{Assertions: fixture.GoldenAssertions,
	Recovery: RecoveryConfig{Window: 3 * time.Second, Within: 10 * time.Second, Threshold: 0.6}}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./reports -update")
	assert.Equal(t, string(want), string(got), "%s differs (run go test ./reports -update to accept)", path)
}

func goldenResults(t *testing.T) *Results {
	t.Helper()
	res, err := ComputeFile("testdata/events.jsonl", goldenConfig)
	require.NoError(t, err)
	return res
}

func TestVerdicts(t *testing.T) {
	base := []ledger.Event{ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "v" })}
	with := func(evs ...ledger.Event) []ledger.Event {
		out := append(append([]ledger.Event{}, base...), evs...)
		if evs[len(evs)-1].Type != ledger.EventRunEnd {
			out = append(out, ev(ledger.EventRunEnd, 5, nil)) // a run that completed
		}
		return out
	}
	leak := func(passed *bool, detail string) ledger.Event {
		return ev(ledger.EventLeakCheck, 2, func(e *ledger.Event) { e.Passed = passed; e.Detail = detail })
	}
	tests := []struct {
		name   string
		events []ledger.Event
		cfg    Config
		want   Verdict
		reason string
	}{
		{"all ok", with(done("a", 1, ledger.OutcomeOK), done("b", 2, ledger.OutcomeRejected)), Config{}, VerdictPass, ""},
		{"silent drop fails", with(done("a", 1, ledger.OutcomeOK), done("b", 2, ledger.OutcomeStalled)), Config{}, VerdictFail, ""},
		{"explicit errors are valid", with(done("a", 1, ledger.OutcomeStreamError), done("b", 2, ledger.OutcomeHTTPError)), Config{}, VerdictPass, ""},
		{"invalid body fails", with(done("a", 1, ledger.OutcomeInvalid)), Config{}, VerdictFail, ""},
		{"no requests is invalid", base, Config{}, VerdictInvalid, "no request"},
		{"self-check failure is invalid", with(done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventSelfCheck, 3, func(e *ledger.Event) { e.Passed = ledger.Bool(false); e.Detail = "p99 lag 900ms" })), Config{}, VerdictInvalid, "self-check"},
		{"unverified fault is invalid", with(done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventFaultStart, 1, func(e *ledger.Event) { e.Fault = "f" }),
			ev(ledger.EventFaultVerified, 1, func(e *ledger.Event) { e.Fault = "f"; e.Passed = ledger.Bool(false); e.Detail = "no hits" })), Config{}, VerdictInvalid, "did not take effect"},
		{"unresolved request is invalid", with(done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventScheduled, 1, func(e *ledger.Event) { e.RequestID = "b" })), Config{}, VerdictInvalid, "1 scheduled request without a terminal outcome"},
		{"duplicate terminal is invalid", with(done("a", 1, ledger.OutcomeOK), done("a", 2, ledger.OutcomeOK)), Config{}, VerdictInvalid, "1 request with more than one"},
		{"run error is invalid, without package names", with(done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventRunEnd, 3, func(e *ledger.Event) { e.Error = "harness: launcher: router died" })), Config{}, VerdictInvalid, "run failed: router died"},
		{"a joined run error gives one reason per part", with(done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventRunEnd, 3, func(e *ledger.Event) {
				e.Error = "harness: faults: chaos: proxy refused: harness: infrastructure failure\nharness: metrics: timeout"
			})), Config{}, VerdictInvalid, "run failed: faults: proxy refused\nrun failed: metrics: timeout"},
		{"a failed self-check is said once", with(done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventSelfCheck, 3, func(e *ledger.Event) { e.Passed = ledger.Bool(false); e.Detail = "p99 lag 2s" }),
			ev(ledger.EventRunEnd, 4, func(e *ledger.Event) { e.Error = "harness: self-check: p99 lag 2s: harness: infrastructure failure" })),
			Config{}, VerdictInvalid, "harness self-check failed (the harness was the bottleneck): p99 lag 2s"},
		{"interruption is invalid", with(done("a", 1, ledger.OutcomeOK),
			ev(ledger.EventRunEnd, 3, func(e *ledger.Event) { e.Interrupted = "interrupt signal received" })), Config{}, VerdictInvalid, "interrupted before the run completed: interrupt signal received"},
		{"a silent drop before the interrupt fails although the interrupt cut a fault's proof short", with(done("a", 1, ledger.OutcomeStalled),
			ev(ledger.EventFaultStart, 1, func(e *ledger.Event) { e.Fault = "f"; e.FaultType = "failpoint"; e.Target = "decode" }),
			ev(ledger.EventFaultVerified, 2, func(e *ledger.Event) {
				e.Fault = "f"
				e.Passed = ledger.Bool(false)
				e.Detail = "no proof before the run ended"
			}),
			ev(ledger.EventRunEnd, 3, func(e *ledger.Event) { e.Interrupted = "interrupt signal received" })), Config{}, VerdictFail, ""},
		{"a silent drop before the interrupt that no assertion judges is invalid", with(done("a", 1, ledger.OutcomeStalled),
			ev(ledger.EventRunEnd, 3, func(e *ledger.Event) { e.Interrupted = "interrupt signal received" })),
			Config{Assertions: []string{"count(http_error) == 0"}}, VerdictInvalid, "interrupted before the run completed"},
		{"a fault with no proof at an uninterrupted end is invalid", with(done("a", 1, ledger.OutcomeStalled),
			ev(ledger.EventFaultStart, 1, func(e *ledger.Event) { e.Fault = "f" }),
			ev(ledger.EventFaultVerified, 2, func(e *ledger.Event) {
				e.Fault = "f"
				e.Passed = ledger.Bool(false)
				e.Detail = "no proof before the run ended"
			})), Config{}, VerdictInvalid, "did not take effect"},
		{"no leak check: no_leaks not evaluated", with(done("a", 1, ledger.OutcomeOK)), Config{Assertions: []string{AssertNoLeaks}}, VerdictInvalid, "no_leaks not evaluated: no leak check in the ledger"},
		{"skipped leak check: no_leaks not evaluated", with(done("a", 1, ledger.OutcomeOK), leak(nil, "metrics endpoint never answered")),
			Config{Assertions: []string{AssertNoLeaks}}, VerdictInvalid, "no_leaks not evaluated: metrics endpoint never answered"},
		{"leak check passed", with(done("a", 1, ledger.OutcomeOK), leak(ledger.Bool(true), "")), Config{Assertions: []string{AssertNoLeaks}}, VerdictPass, ""},
		{"leak check failed", with(done("a", 1, ledger.OutcomeOK), ev(ledger.EventLeakCheck, 2, func(e *ledger.Event) {
			e.Passed = ledger.Bool(false)
			e.Metrics = map[string]float64{"sglang:num_queue_reqs": 3}
		})), Config{Assertions: []string{AssertNoLeaks}}, VerdictFail, ""},
		{"recovery without a fault is not evaluated", with(done("a", 1, ledger.OutcomeOK)), Config{Assertions: []string{AssertRecovery}}, VerdictInvalid, "recovery not evaluated: no fault was injected"},
		{"latency threshold without samples is not evaluated", with(done("a", 1, ledger.OutcomeHTTPError)), Config{Assertions: []string{"p99(itl) < 1s"}}, VerdictInvalid, "p99(itl) < 1s not evaluated: no itl samples"},
		{"count needs no samples", with(done("a", 1, ledger.OutcomeOK)), Config{Assertions: []string{"count(stalled) == 0"}}, VerdictPass, ""},
		{"an unparseable assertion is not evaluated", with(done("a", 1, ledger.OutcomeOK)), Config{Assertions: []string{"p99(ttft) <"}}, VerdictInvalid, "missing value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Compute(tt.events, tt.cfg)
			assert.Equal(t, tt.want, res.Verdict, "assertions %+v, invalid %v", res.Assertions, res.InvalidReasons)
			if tt.reason != "" {
				assert.Contains(t, strings.Join(res.InvalidReasons, "\n"), tt.reason)
			}
			if tt.want != VerdictInvalid {
				assert.Empty(t, res.InvalidReasons)
			}
			for _, r := range res.InvalidReasons {
				assert.NotContains(t, r, "infrastructure failure", "the runner's marker is noise in a verdict")
			}
			if strings.Contains(tt.name, "said once") {
				assert.Len(t, res.InvalidReasons, 1, "%q", res.InvalidReasons)
			}
		})
	}
}

func TestReadable(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"nested prefixes", "harness: chaos: bad spec: rate must be > 0", "bad spec: rate must be > 0"},
		{"prefix after a context", "run failed: harness: router did not become healthy", "run failed: router did not become healthy"},
		{"prose keeps its words", "no readable ledger: open x: no such file", "no readable ledger: open x: no such file"},
		{"not a package", "decode-0: exited", "decode-0: exited"},
		{"standard library", `invalid argument "soon" for "--duration" flag: time: invalid duration "soon"`, `invalid argument "soon" for "--duration" flag: invalid duration "soon"`},
		{"strconv", `invalid argument "x" for "--seed" flag: strconv.ParseInt: parsing "x": invalid syntax`, `invalid argument "x" for "--seed" flag: parsing "x": invalid syntax`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Readable(tt.in)) })
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
		state     State
	}{
		{"immediate", []ledger.Event{sched("a", 10, ledger.OutcomeOK), sched("b", 11, ledger.OutcomeOK), sched("c", 12, ledger.OutcomeOK)}, ledger.Bool(true), 0, StatePass},
		{"after errors", []ledger.Event{sched("a", 10, ledger.OutcomeHTTPError), sched("b", 11, ledger.OutcomeHTTPError), sched("c", 13, ledger.OutcomeOK),
			sched("d", 14, ledger.OutcomeOK), sched("e", 15, ledger.OutcomeOK)}, ledger.Bool(true), 3, StatePass},
		{"never", []ledger.Event{sched("a", 10, ledger.OutcomeHTTPError), sched("b", 15, ledger.OutcomeHTTPError), sched("c", 20, ledger.OutcomeOK),
			sched("d", 45, ledger.OutcomeOK), sched("e", 46, ledger.OutcomeOK), sched("f", 47, ledger.OutcomeOK)}, ledger.Bool(false), 0, StateFail},
		{"requests during the fault do not count", []ledger.Event{sched("a", 5, ledger.OutcomeStalled), sched("b", 10, ledger.OutcomeOK)}, ledger.Bool(true), 0, StatePass},
		{"not measurable", []ledger.Event{sched("a", 5, ledger.OutcomeOK)}, nil, 0, StateNotEvaluated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Compute(append(append([]ledger.Event{}, fault...), tt.events...), Config{Assertions: []string{AssertRecovery},
				Recovery: RecoveryConfig{Window: 3 * time.Second, Within: 30 * time.Second, Threshold: 0.9}})
			f := res.Faults[0]
			require.Equal(t, tt.recovered, f.Recovered)
			if f.TimeToRecover != nil {
				assert.Equal(t, tt.ttr, *f.TimeToRecover)
			}
			assert.Equal(t, tt.state, res.Assertions[0].State, res.Assertions[0].Detail)
		})
	}
}

func TestPercentiles(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i)
	}
	assert.Equal(t, Percentiles{Count: 100, P50: 50, P90: 90, P95: 95, P99: 99, Max: 100, Mean: 50.5}, percentiles(xs))
	assert.Equal(t, Percentiles{}, percentiles(nil))
}

// FuzzBuilder feeds arbitrary ledgers through the builder: whatever it reads, the
// outcome counts add up and every assertion has a state.
func FuzzBuilder(f *testing.F) {
	data, _ := os.ReadFile("testdata/events.jsonl")
	f.Add(data)
	f.Add([]byte("{\"type\":\"done\"}\n{\"ty"))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"type":"leak_check"}` + "\n" + `{"type":"run_end","interrupted":"signal"}` + "\n"))
	// A silent drop before the interrupt: FAIL on its evidence, with no_leaks not evaluated.
	f.Add([]byte(`{"type":"done","request_id":"a","outcome":"stalled"}` + "\n" + `{"type":"run_end","interrupted":"signal"}` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		b := NewBuilder(Config{Assertions: []string{AssertNoSilentDrops, AssertNoLeaks, AssertRecovery, "p99(ttft) < 1s"}})
		_, _ = ledger.Read(bytes.NewReader(in), func(e ledger.Event) error { b.Add(e); return nil })
		r := b.Results()
		total := 0
		for _, o := range ledger.Outcomes {
			total += r.Outcomes[o]
		}
		require.Equal(t, r.Requests, total, "outcome counts %v", r.Outcomes)
		require.Len(t, r.Outcomes, len(ledger.Outcomes))
		for _, a := range r.Assertions {
			require.Contains(t, []State{StatePass, StateFail, StateNotEvaluated}, a.State)
			require.Equal(t, a.State == StatePass, a.Passed)
			if a.State == StateNotEvaluated && (r.Verdict != VerdictFail || r.SilentDrops == 0) {
				// FAIL only on the evidence of a silent drop (judgedOnEvidence).
				require.Equal(t, VerdictInvalid, r.Verdict, "a not_evaluated assertion must make the run invalid")
			}
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
			assert.Equal(t, tt.want, strings.Join(HeldAt(json.RawMessage(tt.raw)), ","))
		})
	}
}

// TestUnknownEventTypeNoted: a ledger line of a type this harness does not know (a
// newer harness wrote it, or the ledger was edited) is said in the report, not dropped
// in silence; the types it knows but does not judge say nothing.
func TestUnknownEventTypeNoted(t *testing.T) {
	evs := []ledger.Event{
		fixture.Ev(ledger.EventRunStart, 0, nil),
		fixture.Ev(ledger.EventScheduled, 0.1, func(e *ledger.Event) { e.RequestID = "a" }),
		fixture.Ev(ledger.EventHeaders, 0.2, func(e *ledger.Event) { e.RequestID = "a" }),
		fixture.Ev(ledger.EventFirstToken, 0.3, func(e *ledger.Event) { e.RequestID = "a" }),
		fixture.Ev(ledger.EventLog, 0.3, nil),
		fixture.Ev("mystery", 0.4, nil),
		fixture.Ev("mystery", 0.5, nil),
		fixture.Done("a", 1, ledger.OutcomeOK),
		fixture.Ev(ledger.EventRunEnd, 1.1, nil),
	}
	r := Compute(evs, Config{})
	require.Len(t, r.Notes, 1, "%q", r.Notes)
	assert.Contains(t, r.Notes[0], `2 events of unknown type "mystery"`)
}

// TestLedgerWithoutRunEnd: a ledger that stops before run_end (the harness was killed,
// ran out of memory or disk) is a run cut short: INVALID, not PASS, unless it already
// holds a silent drop (FAIL on its evidence, as an interrupted run); a run judging its
// own ledger before writing run_end (InProgress) is not.
func TestLedgerWithoutRunEnd(t *testing.T) {
	evs := func(o ledger.Outcome, end bool) []ledger.Event {
		out := []ledger.Event{
			fixture.Ev(ledger.EventRunStart, 0, nil),
			fixture.Ev(ledger.EventScheduled, 0.1, func(e *ledger.Event) { e.RequestID = "a" }),
			fixture.Done("a", 1, o),
		}
		if end {
			out = append(out, fixture.Ev(ledger.EventRunEnd, 1.1, nil))
		}
		return out
	}
	tests := []struct {
		name       string
		outcome    ledger.Outcome
		end        bool
		inProgress bool
		want       Verdict
	}{
		{"complete", ledger.OutcomeOK, true, false, VerdictPass},
		{"cut short", ledger.OutcomeOK, false, false, VerdictInvalid},
		{"cut short after a silent drop", ledger.OutcomeStalled, false, false, VerdictFail},
		{"judged while running", ledger.OutcomeOK, false, true, VerdictPass},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Compute(evs(tt.outcome, tt.end), Config{InProgress: tt.inProgress})
			require.Equal(t, tt.want, r.Verdict, "%q %q", r.InvalidReasons, r.Notes)
			if tt.want == VerdictInvalid {
				assert.Contains(t, strings.Join(r.InvalidReasons, "; "), "no run_end")
			}
		})
	}
}
