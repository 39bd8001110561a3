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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files")

var goldenConfig = Config{
	Assertions: []string{AssertNoSilentDrops, AssertValidResponses, AssertNoLeaks, AssertRecovery,
		"p99(ttft) < 2s", "rate(rejected) < 0.1", "count(http_error) == 0", "max(e2e) <= 10s", "p95(e2e) < 5s"},
	Recovery: RecoveryConfig{Window: 3 * time.Second, Within: 10 * time.Second, Threshold: 0.6},
}

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
			require.NoError(t, out.write(&buf, res))
			golden(t, out.file, buf.Bytes())
		})
	}
}

func TestGoldenResultsContent(t *testing.T) {
	res := goldenResults(t)
	assert.Equal(t, VerdictFail, res.Verdict)
	assert.Equal(t, "golden", res.Scenario)
	assert.Equal(t, int64(42), res.Seed)
	assert.Equal(t, "http://127.0.0.1:30000", res.Target)
	assert.Equal(t, 20, res.Requests)
	assert.Equal(t, 2, res.SilentDrops)
	require.Len(t, res.Drops, 2)
	d := res.Drops[0]
	assert.Equal(t, "r009", d.RequestID)
	assert.Equal(t, ledger.PhaseBeforeFirstToken, d.Phase)
	assert.Equal(t, 3.0, d.Age)
	assert.Contains(t, string(d.ServerDebug), "decode_prealloc_queue")

	// Every taxonomy key is present in results.json, even with a zero count.
	var raw map[string]any
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, res))
	require.NoError(t, json.Unmarshal(buf.Bytes(), &raw))
	outs := raw["outcomes"].(map[string]any)
	for _, o := range ledger.Outcomes {
		assert.Contains(t, outs, string(o))
	}
	for _, k := range []string{"verdict", "outcomes", "silent_drops", "assertions", "ttft", "itl", "e2e", "seed", "scenario", "target", "provenance", "notes"} {
		assert.Contains(t, raw, k)
	}
	want := map[string]State{
		AssertNoSilentDrops: StateFail, AssertValidResponses: StateFail, AssertNoLeaks: StatePass, AssertRecovery: StatePass,
		"p99(ttft) < 2s": StatePass, "rate(rejected) < 0.1": StatePass, "count(http_error) == 0": StateFail, "max(e2e) <= 10s": StatePass,
		"p95(e2e) < 5s": StatePass,
	}
	got := map[string]State{}
	for _, a := range res.Assertions {
		got[a.Name] = a.State
		assert.Equal(t, a.State == StatePass, a.Passed, "%s: passed must agree with state", a.Name)
	}
	assert.Equal(t, want, got)
	f := res.Faults[0]
	require.NotNil(t, f.Recovered)
	require.True(t, *f.Recovered, "fault %+v did not recover", f)
	// Fault stopped at 12 s; requests scheduled at 12, 13, 14 s are deadline_exceeded, ok,
	// ok: 2 of 3 reach the 0.6 threshold at once.
	require.NotNil(t, f.TimeToRecover)
	assert.Zero(t, *f.TimeToRecover)
	// JUnit parses and has one case per assertion and three per fault.
	buf.Reset()
	require.NoError(t, WriteJUnit(&buf, res))
	var ju junitSuites
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &ju))
	assert.Len(t, ju.Suites[0].Cases, len(res.Assertions)+3*len(res.Faults))
	assert.Equal(t, 3, ju.Failures)
}

// TestProvenanceFromLedger renders run_start's provenance and the target event.
func TestProvenanceFromLedger(t *testing.T) {
	res := goldenResults(t)
	require.NotNil(t, res.Provenance)
	p := res.Provenance
	assert.Equal(t, "v0.3.0", p.HarnessVersion)
	assert.Equal(t, "0123abcd", p.Revision)
	assert.Equal(t, "go1.26.8", p.GoVersion)
	assert.Equal(t, "ci-7", p.Host)
	assert.Equal(t, []string{"NVIDIA H200"}, p.GPUs)
	assert.Equal(t, []string{"harness", "run", "golden", "--seed", "42"}, p.CommandLine)
	assert.Equal(t, "pdserver v0.3.0", p.ServerVersion)
	assert.JSONEq(t, `{"object":"list","data":[{"id":"ref","object":"model"}]}`, string(p.Models))
	assert.Equal(t, []string{"--target replaces target.launch: its processes are not started"}, res.Notes)

	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, res))
	assert.Contains(t, md.String(), "- provenance: harness v0.3.0 (0123abcd); go1.26.8; host ci-7; linux/amd64; CPU AMD EPYC 9654 x 16; GPUs NVIDIA H200; server pdserver v0.3.0; models ref; command `harness run golden --seed 42`\n")

	// No provenance in the ledger: no section.
	bare := Compute([]ledger.Event{ev(ledger.EventRunStart, 0, nil), done("a", 1, ledger.OutcomeOK)}, Config{})
	assert.Nil(t, bare.Provenance)
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
	with := func(evs ...ledger.Event) []ledger.Event { return append(append([]ledger.Event{}, base...), evs...) }
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

// TestNotEvaluatedEverywhere: a not_evaluated assertion shows in the table, summary.md,
// junit.xml (as an error) and results.json (state, passed false), and the leak_check
// section says why.
func TestNotEvaluatedEverywhere(t *testing.T) {
	evs := []ledger.Event{
		ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "ne" }),
		done("a", 1, ledger.OutcomeOK),
		ev(ledger.EventLeakCheck, 2, func(e *ledger.Event) { e.Detail = "metrics endpoint never answered" }),
	}
	res := Compute(evs, Config{Assertions: []string{AssertNoSilentDrops, AssertNoLeaks}})
	require.Equal(t, VerdictInvalid, res.Verdict)
	require.Len(t, res.Assertions, 2)
	assert.Equal(t, AssertionResult{Name: AssertNoLeaks, State: StateNotEvaluated, Detail: "metrics endpoint never answered"}, res.Assertions[1])

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, res))
	var raw struct {
		Assertions []map[string]any `json:"assertions"`
		Leak       map[string]any   `json:"leak_check"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &raw))
	assert.Equal(t, "not_evaluated", raw.Assertions[1]["state"])
	assert.Equal(t, false, raw.Assertions[1]["passed"])
	assert.Equal(t, "pass", raw.Assertions[0]["state"])
	assert.Equal(t, "not_evaluated", raw.Leak["state"])
	assert.Equal(t, "metrics endpoint never answered", raw.Leak["detail"])

	var ju bytes.Buffer
	require.NoError(t, WriteJUnit(&ju, res))
	var suites junitSuites
	require.NoError(t, xml.Unmarshal(ju.Bytes(), &suites))
	c := suites.Suites[0].Cases[1]
	require.NotNil(t, c.Error, "not_evaluated must be a junit error")
	assert.Nil(t, c.Failure)
	assert.Equal(t, "NotEvaluated", c.Error.Type)
	assert.Equal(t, 0, suites.Failures)
	assert.Equal(t, 2, suites.Errors, "the assertion and the valid_run case")

	var md, tab bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, res))
	assert.Contains(t, md.String(), "| `no_leaks` | NOT EVALUATED | metrics endpoint never answered |")
	assert.Contains(t, md.String(), "# ne: INVALID")
	require.NoError(t, WriteTable(&tab, res))
	assert.Regexp(t, `no_leaks\s+NOT EVALUATED\s+metrics endpoint never answered`, tab.String())
	assert.Equal(t, 1, strings.Count(tab.String(), "metrics endpoint never answered; ")+strings.Count(tab.String(), "INVALID: no_leaks not evaluated"),
		"the invalid reason is said once")
	assert.Equal(t, "INVALID ne: 1 request, 0 silent drops; no_leaks not evaluated: metrics endpoint never answered", VerdictLine(res))

	// No leak check event at all: the section still says not evaluated, and why.
	missing := Compute(evs[:2], Config{Assertions: []string{AssertNoLeaks}})
	require.NotNil(t, missing.Leak)
	assert.Equal(t, StateNotEvaluated, missing.Leak.State)
	assert.Contains(t, missing.Leak.Detail, "no leak check in the ledger")
	// Not listed and not run: no section.
	assert.Nil(t, Compute(evs[:2], Config{}).Leak)
}

func TestVerdictLine(t *testing.T) {
	pass := Compute([]ledger.Event{ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "v" }), done("a", 1, ledger.OutcomeOK), done("b", 1, ledger.OutcomeOK)}, Config{})
	assert.Equal(t, "PASS v: 2 requests, 0 silent drops", VerdictLine(pass))
	fail := Compute([]ledger.Event{ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "v" }), done("a", 1, ledger.OutcomeStalled)}, Config{})
	assert.Equal(t, "FAIL v: 1 request, 1 silent drop; failed: no_silent_drops", VerdictLine(fail))
}

func TestNotesFromLedger(t *testing.T) {
	evs := []ledger.Event{
		ev(ledger.EventRunStart, 0, nil),
		ev(ledger.EventNote, 0, func(e *ledger.Event) { e.Message = "first | note" }),
		done("a", 1, ledger.OutcomeOK),
		ev(ledger.EventNote, 2, func(e *ledger.Event) { e.Message = "NVML library missing although /dev/nvidia0 exists" }),
		ev(ledger.EventNote, 2, nil), // empty: ignored
	}
	res := Compute(evs, Config{})
	assert.Equal(t, []string{"first | note", "NVML library missing although /dev/nvidia0 exists"}, res.Notes)
	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, res))
	assert.Contains(t, md.String(), "## Notes\n\n- first \\| note\n- NVML library missing although /dev/nvidia0 exists\n")
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
		{"mean(e2e) > 1.5s", "mean(e2e) > 1.5s", 1.5, ""},
		{"p99(ttft) < 2", "", 0, `"2" has no unit: write a duration such as 2s or 2ms`},
		{"max(e2e) != 0", "max(e2e) != 0s", 0, ""},
		{"max(e2e) != 0s", "max(e2e) != 0s", 0, ""},
		{"rate(rejected) < 0.1", "rate(rejected) < 0.1", 0.1, ""},
		{"rate(silent_drops) == 0", "rate(silent_drops) == 0", 0, ""},
		{"count(stalled) == 0", "count(stalled) == 0", 0, ""},
		{"count(ok) >= 100", "count(ok) >= 100", 100, ""},
		{"p99(ttfb) < 2s", "", 0, "takes ttft, itl or e2e"},
		{"p95(ttft) < 2s", "p95(ttft) < 2s", 2, ""},
		{"p59(ttft) < 2s", "", 0, `unknown function "p59" (did you mean "p50"?)`},
		{"rate(stalld) < 1", "", 0, `(did you mean "stalled"?)`},
		{"count(silent_drop) == 0", "", 0, `(did you mean "silent_drops"?)`},
		{"p99(tftt) < 2s", "", 0, `(did you mean "ttft"?)`},
		{"cuont(ok) > 1", "", 0, `(did you mean "count"?)`},
		{"no_leak", "", 0, `(did you mean "no_leaks"?)`},
		{"rate(zzzzzz) < 1", "", 0, `not "zzzzzz"`},
		{"rate(bogus) < 1", "", 0, "takes an outcome"},
		{"rate(ok) > 1.5", "", 0, "fraction"},
		{"count(ok) > 1.5", "", 0, "whole number"},
		{"p99(ttft) 2s", "", 0, "want an operator"},
		{"p99(ttft) <", "", 0, "missing value"},
		{"p99(ttft < 2s", "", 0, "missing ')'"},
		{"p99(ttft) < soon", "", 0, "not a duration"},
		{"no_silent_drop", "", 0, "unknown assertion"},
	}
	_, err := ParseAssertion("rate(zzzzzz) < 1")
	assert.NotContains(t, err.Error(), "did you mean", "no hint when nothing is close")
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAssertion(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.name, a.Name)
			assert.Equal(t, tt.value, a.Value)
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
		require.NoError(t, err, "normalised %q does not parse", a.String())
		require.Equal(t, []any{a.Builtin(), a.Func, a.Arg, a.Op}, []any{b.Builtin(), b.Func, b.Arg, b.Op}, "round trip %q -> %q changed it", s, a.String())
	})
}

// FuzzBuilder feeds arbitrary ledgers through the builder: whatever it reads, the
// outcome counts add up and every assertion has a state.
func FuzzBuilder(f *testing.F) {
	data, _ := os.ReadFile("testdata/events.jsonl")
	f.Add(data)
	f.Add([]byte("{\"type\":\"done\"}\n{\"ty"))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"type":"leak_check"}` + "\n" + `{"type":"run_end","interrupted":"signal"}` + "\n"))
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
			if a.State == StateNotEvaluated {
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
			assert.Equal(t, tt.want, strings.Join(heldAt(json.RawMessage(tt.raw)), ","))
		})
	}
}
