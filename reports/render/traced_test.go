package render

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/internal/fixture"
)

const (
	dropTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	errTrace   = "0af7651916cd43dd8448eb211c80319c"
	faultTrace = "11111111111111111111111111111111"
)

// tracedLedger has a silent drop, an unexplained error and an error a fault explains,
// each with the trace id of its traceparent.
func tracedLedger() []ledger.Event {
	return []ledger.Event{
		{Time: fixture.At(0), Type: ledger.EventRunStart, Scenario: "traced", Seed: 3},
		{Time: fixture.At(0.1), Type: ledger.EventScheduled, RequestID: "ok-1", Workload: "w", TraceID: "22222222222222222222222222222222"},
		{Time: fixture.At(0.2), Type: ledger.EventScheduled, RequestID: "drop-1", Workload: "w", TraceID: dropTrace},
		{Time: fixture.At(0.3), Type: ledger.EventScheduled, RequestID: "err-1", Workload: "w", TraceID: errTrace},
		{Time: fixture.At(0.4), Type: ledger.EventScheduled, RequestID: "flt-1", Workload: "w", TraceID: faultTrace},
		{Time: fixture.At(1), Type: ledger.EventDone, RequestID: "ok-1", Workload: "w", Outcome: ledger.OutcomeOK, E2E: 0.9, TraceID: "22222222222222222222222222222222"},
		{Time: fixture.At(2), Type: ledger.EventDone, RequestID: "err-1", Workload: "w", Outcome: ledger.OutcomeConnectionLost,
			Cause: ledger.CauseUnexplained, Error: "connection reset by peer", E2E: 1.7, TraceID: errTrace},
		{Time: fixture.At(2.5), Type: ledger.EventDone, RequestID: "flt-1", Workload: "w", Outcome: ledger.OutcomeTransportError,
			Cause: ledger.CauseFaultPrefix + "kill", E2E: 2.1, TraceID: faultTrace},
		{Time: fixture.At(5), Type: ledger.EventDone, RequestID: "drop-1", Workload: "w", Outcome: ledger.OutcomeDeadlineExceeded,
			Cause: ledger.CauseUnexplained, Phase: ledger.PhaseBeforeFirstToken, Age: 4.8, E2E: 4.8, TraceID: dropTrace},
		{Time: fixture.At(5.1), Type: ledger.EventRunEnd},
	}
}

func TestTraceIDsBesideDropsAndUnexplainedErrors(t *testing.T) {
	res := reports.Compute(tracedLedger(), reports.Config{})
	require.Len(t, res.Drops, 1)
	assert.Equal(t, dropTrace, res.Drops[0].TraceID)
	// The drop is listed among the silent drops (no_silent_drops judges it), not among
	// the explicit errors explained_errors counts; the fault-explained error is not listed.
	require.Len(t, res.Unexplained, 1)
	u := res.Unexplained[0] // its exported fields: what results.json and the pages show
	assert.Equal(t, reports.UnexplainedError{RequestID: "err-1", Workload: "w", Outcome: ledger.OutcomeConnectionLost,
		Error: "connection reset by peer", At: 2, TraceID: errTrace},
		reports.UnexplainedError{RequestID: u.RequestID, Workload: u.Workload, Outcome: u.Outcome, Status: u.Status, Error: u.Error, At: u.At, TraceID: u.TraceID})
	assert.Equal(t, 1, res.UnexplainedErrors)

	b, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"trace_id":"`+dropTrace+`"`)
	assert.Contains(t, string(b), `"unexplained":[`)

	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, res, res.Timeline(), HTMLOptions{}))
	html := page.String()
	dropRow := regexp.MustCompile(`(?s)<table id="drops">.*?<code>drop-1</code><br><span class="trace">trace <code>` + dropTrace + `</code>`)
	assert.Regexp(t, dropRow, html, "the trace id sits beside the silent drop's request id")
	errRow := regexp.MustCompile(`(?s)<table id="unexplained">.*?<code>err-1</code></td><td><code>` + errTrace + `</code>`)
	assert.Regexp(t, errRow, html, "the trace id sits beside the unexplained error")
	assert.NotContains(t, html, faultTrace, "an explained error is not listed")
}

func TestNoUnexplainedSectionWithoutThem(t *testing.T) {
	evs := tracedLedger()
	res := reports.Compute(append(evs[:6:6], evs[len(evs)-1]), reports.Config{})
	assert.Empty(t, res.Unexplained)
	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, res, res.Timeline(), HTMLOptions{}))
	assert.NotContains(t, page.String(), `id="unexplained"`)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"unexplained":`, "no list for runs without them")
	assert.Contains(t, string(b), `"unexplained_errors":0`, "the count explained_errors judges is always there")
}
