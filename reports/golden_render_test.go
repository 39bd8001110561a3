package reports_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/internal/fixture"
	"pdsoak/reports/render"
)

func TestGoldenOutputs(t *testing.T) {
	res := reports.GoldenResults(t)
	for _, out := range []struct {
		file  string
		write func(*bytes.Buffer, *reports.Results) error
	}{
		{"results.golden.json", func(b *bytes.Buffer, r *reports.Results) error { return render.WriteJSON(b, r) }},
		{"junit.golden.xml", func(b *bytes.Buffer, r *reports.Results) error { return render.WriteJUnit(b, r) }},
		{"summary.golden.md", func(b *bytes.Buffer, r *reports.Results) error { return render.WriteMarkdown(b, r) }},
		{"table.golden.txt", func(b *bytes.Buffer, r *reports.Results) error { return render.WriteTable(b, r) }},
	} {
		t.Run(out.file, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, out.write(&buf, res))
			reports.Golden(t, out.file, buf.Bytes())
		})
	}
}

func TestGoldenResultsContent(t *testing.T) {
	res := reports.GoldenResults(t)
	assert.Equal(t, reports.VerdictFail, res.Verdict)
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
	require.NoError(t, render.WriteJSON(&buf, res))
	require.NoError(t, json.Unmarshal(buf.Bytes(), &raw))
	outs := raw["outcomes"].(map[string]any)
	for _, o := range ledger.Outcomes {
		assert.Contains(t, outs, string(o))
	}
	for _, k := range []string{"verdict", "outcomes", "silent_drops", "assertions", "ttft", "itl", "e2e", "seed", "scenario", "target", "provenance", "notes"} {
		assert.Contains(t, raw, k)
	}
	want := map[string]reports.State{
		reports.AssertNoSilentDrops: reports.StateFail, reports.AssertValidResponses: reports.StateFail, reports.AssertNoLeaks: reports.StatePass, reports.AssertRecovery: reports.StatePass,
		"p99(ttft) < 2s": reports.StatePass, "rate(rejected) < 0.1": reports.StatePass, "count(http_error) == 0": reports.StateFail, "max(e2e) <= 10s": reports.StatePass,
		"p95(e2e) < 5s": reports.StatePass,
	}
	got := map[string]reports.State{}
	for _, a := range res.Assertions {
		got[a.Name] = a.State
		assert.Equal(t, a.State == reports.StatePass, a.Passed, "%s: passed must agree with state", a.Name)
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
	require.NoError(t, render.WriteJUnit(&buf, res))
	var ju junitDoc
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &ju))
	assert.Len(t, ju.Suites[0].Cases, len(res.Assertions)+3*len(res.Faults))
	assert.Equal(t, 3, ju.Failures)
}

// TestProvenanceFromLedger renders run_start's provenance and the target event.
func TestProvenanceFromLedger(t *testing.T) {
	res := reports.GoldenResults(t)
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
	require.NoError(t, render.WriteMarkdown(&md, res))
	assert.Contains(t, md.String(), "- provenance: harness v0.3.0 (0123abcd); go1.26.8; host ci-7; linux/amd64; CPU AMD EPYC 9654 x 16; GPUs NVIDIA H200; server pdserver v0.3.0; models ref; command `harness run golden --seed 42`\n")

	// No provenance in the ledger: no section.
	bare := reports.Compute([]ledger.Event{fixture.Ev(ledger.EventRunStart, 0, nil), fixture.Done("a", 1, ledger.OutcomeOK)}, reports.Config{})
	assert.Nil(t, bare.Provenance)
}

// TestNotEvaluatedEverywhere: a not_evaluated assertion shows in the table, summary.md,
// junit.xml (as an error) and results.json (state, passed false), and the leak_check
// section says why.
func TestNotEvaluatedEverywhere(t *testing.T) {
	evs := []ledger.Event{
		fixture.Ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "ne" }),
		fixture.Done("a", 1, ledger.OutcomeOK),
		fixture.Ev(ledger.EventLeakCheck, 2, func(e *ledger.Event) { e.Detail = "metrics endpoint never answered" }),
		fixture.Ev(ledger.EventRunEnd, 3, nil),
	}
	res := reports.Compute(evs, reports.Config{Assertions: []string{reports.AssertNoSilentDrops, reports.AssertNoLeaks}})
	require.Equal(t, reports.VerdictInvalid, res.Verdict)
	require.Len(t, res.Assertions, 2)
	assert.Equal(t, reports.AssertionResult{Name: reports.AssertNoLeaks, State: reports.StateNotEvaluated, Detail: "metrics endpoint never answered"}, res.Assertions[1])

	var js bytes.Buffer
	require.NoError(t, render.WriteJSON(&js, res))
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
	require.NoError(t, render.WriteJUnit(&ju, res))
	var suites junitDoc
	require.NoError(t, xml.Unmarshal(ju.Bytes(), &suites))
	c := suites.Suites[0].Cases[1]
	require.NotNil(t, c.Error, "not_evaluated must be a junit error")
	assert.Nil(t, c.Failure)
	assert.Equal(t, "NotEvaluated", c.Error.Type)
	assert.Equal(t, 0, suites.Failures)
	assert.Equal(t, 2, suites.Errors, "the assertion and the valid_run case")

	var md, tab bytes.Buffer
	require.NoError(t, render.WriteMarkdown(&md, res))
	assert.Contains(t, md.String(), "| `no_leaks` | NOT EVALUATED | metrics endpoint never answered |")
	assert.Contains(t, md.String(), "# ne: INVALID")
	require.NoError(t, render.WriteTable(&tab, res))
	assert.Regexp(t, `no_leaks\s+NOT EVALUATED\s+metrics endpoint never answered`, tab.String())
	assert.Equal(t, 1, strings.Count(tab.String(), "metrics endpoint never answered; ")+strings.Count(tab.String(), "INVALID: no_leaks not evaluated"),
		"the invalid reason is said once")
	assert.Equal(t, "INVALID ne: 1 request, 0 silent drops; no_leaks not evaluated: metrics endpoint never answered", render.VerdictLine(res))

	// No leak check event at all: the section still says not evaluated, and why.
	missing := reports.Compute(evs[:2], reports.Config{Assertions: []string{reports.AssertNoLeaks}})
	require.NotNil(t, missing.Leak)
	assert.Equal(t, reports.StateNotEvaluated, missing.Leak.State)
	assert.Contains(t, missing.Leak.Detail, "no leak check in the ledger")
	// Not listed and not run: no section.
	assert.Nil(t, reports.Compute(evs[:2], reports.Config{}).Leak)
}

func TestVerdictLine(t *testing.T) {
	pass := reports.Compute([]ledger.Event{fixture.Ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "v" }), fixture.Done("a", 1, ledger.OutcomeOK), fixture.Done("b", 1, ledger.OutcomeOK), fixture.Ev(ledger.EventRunEnd, 2, nil)}, reports.Config{})
	assert.Equal(t, "PASS v: 2 requests, 0 silent drops", render.VerdictLine(pass))
	fail := reports.Compute([]ledger.Event{fixture.Ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "v" }), fixture.Done("a", 1, ledger.OutcomeStalled)}, reports.Config{})
	assert.Equal(t, "FAIL v: 1 request, 1 silent drop; failed: no_silent_drops", render.VerdictLine(fail))
}

func TestNotesFromLedger(t *testing.T) {
	evs := []ledger.Event{
		fixture.Ev(ledger.EventRunStart, 0, nil),
		fixture.Ev(ledger.EventNote, 0, func(e *ledger.Event) { e.Message = "first | note" }),
		fixture.Done("a", 1, ledger.OutcomeOK),
		fixture.Ev(ledger.EventNote, 2, func(e *ledger.Event) { e.Message = "NVML library missing although /dev/nvidia0 exists" }),
		fixture.Ev(ledger.EventNote, 2, nil), // empty: ignored
	}
	res := reports.Compute(evs, reports.Config{})
	assert.Equal(t, []string{"first | note", "NVML library missing although /dev/nvidia0 exists"}, res.Notes)
	var md bytes.Buffer
	require.NoError(t, render.WriteMarkdown(&md, res))
	assert.Contains(t, md.String(), "## Notes\n\n- first \\| note\n- NVML library missing although /dev/nvidia0 exists\n")
}

// junitDoc is as much of junit.xml as these tests read.
type junitDoc struct {
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Suites   []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Type string `xml:"type,attr"`
			} `xml:"failure"`
			Error *struct {
				Type string `xml:"type,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}
