package reports_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
)

// The report says in one sentence where the drops are held and who waits on them, and
// its TTFT card owns up to the requests that never got a first token.
func TestDropDiagnosisAndHeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := []ledger.Event{{Time: t0, Type: ledger.EventRunStart, Scenario: "x"}}
	dbg := func(stages ...string) json.RawMessage {
		type entry struct {
			Stage string `json:"stage"`
		}
		type src struct {
			Process string  `json:"process"`
			Entries []entry `json:"entries"`
		}
		var s []src
		for i := 0; i+1 < len(stages); i += 2 {
			s = append(s, src{Process: stages[i], Entries: []entry{{Stage: stages[i+1]}}})
		}
		b, _ := json.Marshal(map[string]any{"sources": s})
		return b
	}
	for i := range 3 {
		sched := t0.Add(time.Duration(i) * time.Second)
		id := fmt.Sprintf("d%d", i)
		evs = append(evs, ledger.Event{Time: sched, Type: ledger.EventScheduled, RequestID: id},
			ledger.Event{Time: sched.Add(20 * time.Second), Type: ledger.EventDone, RequestID: id, Scheduled: &sched,
				Outcome: ledger.OutcomeDeadlineExceeded, Phase: ledger.PhaseBeforeFirstToken, Age: 20,
				ServerDebug: dbg("router", "decode_leg", "prefill-0", "bootstrap", "decode-0", "prealloc")})
	}
	// decode-0's prealloc gauge froze at 0 (SGLang refreshes it only after forward
	// steps) while prefill-0's bootstrap gauge counted the held requests.
	for i := range 25 {
		at := t0.Add(time.Duration(i) * time.Second)
		evs = append(evs, ledger.Event{Time: at, Type: ledger.EventSample, Source: "decode-0", Metrics: map[string]float64{"sglang:num_decode_prealloc_queue_reqs": 0}},
			ledger.Event{Time: at, Type: ledger.EventSample, Source: "prefill-0", Metrics: map[string]float64{"sglang:num_prefill_prealloc_queue_reqs": 3}})
	}
	ok := t0.Add(time.Second)
	evs = append(evs, ledger.Event{Time: ok, Type: ledger.EventScheduled, RequestID: "ok"},
		ledger.Event{Time: ok.Add(time.Second), Type: ledger.EventDone, RequestID: "ok", Scheduled: &ok, Outcome: ledger.OutcomeOK, TTFT: 0.38, E2E: 1},
		ledger.Event{Time: t0.Add(30 * time.Second), Type: ledger.EventRunEnd})
	r := reports.Compute(evs, reports.Config{})
	assert.Equal(t, "3 silent drops held in decode-0's prealloc stage; prefill-0 (bootstrap) and router (decode_leg) are waiting on it", r.DropDiagnosis)
	assert.Equal(t, map[string]int{"decode-0: prealloc": 3}, r.DropRoots)
	assert.Equal(t, 3, r.NoFirstToken)
	var md, page bytes.Buffer
	require.NoError(t, render.WriteMarkdown(&md, r))
	assert.Contains(t, md.String(), "**Diagnosis:** 3 silent drops held in decode-0's prealloc stage")
	require.NoError(t, render.WriteHTML(&page, r, r.Timeline(), render.HTMLOptions{}))
	assert.Contains(t, page.String(), "3 never got a first token")
	assert.Contains(t, page.String(), `id="diagnosis"`)
	assert.Contains(t, page.String(), `id="causes"`)
	notes := map[string]string{}
	for _, g := range r.Timeline().Gauges {
		notes[g.Metric] = g.Note
	}
	assert.Equal(t, "This gauge disagrees with /debug/requests: decode-0 read 0 while /debug/requests held 3 silent drops there (SGLang refreshes decode gauges only after forward steps, so they freeze when decode goes idle).",
		notes["sglang:num_decode_prealloc_queue_reqs"])
	assert.Empty(t, notes["sglang:num_prefill_prealloc_queue_reqs"], "prefill's gauge agreed")
	assert.Contains(t, page.String(), `class="gauge-note"`)
}
