package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// feed is a small ledger: two workloads, one fault window, an ok request, a refusal,
// a silent drop, and one request still in flight.
func feed(m interface{ Observe(ledger.Event) }) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, ev := range []ledger.Event{
		{Time: at(0), Type: ledger.EventRunStart, Scenario: "s", Seed: 7},
		{Time: at(0.1), Type: ledger.EventScheduled, RequestID: "a-1", Workload: "agents"},
		{Time: at(0.1), Type: ledger.EventSent, RequestID: "a-1", Workload: "agents", Lag: 0.002},
		{Time: at(0.2), Type: ledger.EventScheduled, RequestID: "o-1", Workload: "open"},
		{Time: at(0.2), Type: ledger.EventSent, RequestID: "o-1", Workload: "open", Lag: 0.004},
		{Time: at(0.3), Type: ledger.EventScheduled, RequestID: "o-2", Workload: "open"},
		{Time: at(0.5), Type: ledger.EventFaultStart, Fault: "kill-decode", FaultType: "process_kill"},
		{Time: at(1.1), Type: ledger.EventDone, RequestID: "a-1", Workload: "agents", Outcome: ledger.OutcomeOK,
			TTFT: 0.3, E2E: 1.0, ITL: []float64{0.02, 0.03, 0.2}},
		{Time: at(1.2), Type: ledger.EventDone, RequestID: "o-1", Workload: "open", Outcome: ledger.OutcomeRejected,
			Cause: ledger.CauseRefused, Status: 503, E2E: 1.0},
		{Time: at(2), Type: ledger.EventFaultStop, Fault: "kill-decode"},
		{Time: at(9), Type: ledger.EventScheduled, RequestID: "o-3", Workload: "open"},
		{Time: at(9.5), Type: ledger.EventDone, RequestID: "o-3", Workload: "open", Outcome: ledger.OutcomeStalled,
			Cause: ledger.CauseUnexplained, Phase: ledger.PhaseMidStream, TTFT: 0.2, E2E: 0.5},
	} {
		m.Observe(ev)
	}
}

func TestMetricsFollowTheLedger(t *testing.T) {
	m := NewMetrics(Labels{Scenario: "s", Seed: 7, Label: "abc123"}, false)
	feed(m)
	want := `
# HELP pdsoak_requests_total Requests resolved, by outcome and by the cause that explains a non-ok outcome ("" for ok).
# TYPE pdsoak_requests_total counter
pdsoak_requests_total{cause="",outcome="ok",scenario="s",workload="agents"} 1
pdsoak_requests_total{cause="refused",outcome="rejected",scenario="s",workload="open"} 1
pdsoak_requests_total{cause="unexplained",outcome="stalled",scenario="s",workload="open"} 1
# HELP pdsoak_in_flight Requests scheduled and not yet resolved.
# TYPE pdsoak_in_flight gauge
pdsoak_in_flight{scenario="s",workload="agents"} 0
pdsoak_in_flight{scenario="s",workload="open"} 1
# HELP pdsoak_silent_drops_total Silent drops (stalled + deadline_exceeded).
# TYPE pdsoak_silent_drops_total counter
pdsoak_silent_drops_total{scenario="s",workload="open"} 1
# HELP pdsoak_fault_active 1 while a declared fault is applied, 0 after it is reverted.
# TYPE pdsoak_fault_active gauge
pdsoak_fault_active{fault="kill-decode",scenario="s",type="process_kill"} 0
# HELP pdsoak_run_info The run's identity; always 1.
# TYPE pdsoak_run_info gauge
pdsoak_run_info{label="abc123",scenario="s",seed="7"} 1
`
	require.NoError(t, testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want),
		SeriesRequests, SeriesInFlight, SeriesSilentDrops, SeriesFaultActive, SeriesRunInfo))

	// Histograms hold the reports' samples: TTFT where a token came, every gap, every e2e.
	counts := map[string]uint64{}
	mfs, err := m.Gatherer().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			if h := mt.GetHistogram(); h != nil {
				counts[mf.GetName()] += h.GetSampleCount()
			}
		}
	}
	assert.Equal(t, map[string]uint64{SeriesTTFT: 2, SeriesITL: 3, SeriesE2E: 3, SeriesHarnessLag: 2}, counts)
}

func TestFaultActiveWhileApplied(t *testing.T) {
	m := NewMetrics(Labels{Scenario: "s"}, false)
	m.Observe(ledger.Event{Type: ledger.EventFaultStart, Fault: "f", FaultType: "link_down"})
	assert.Equal(t, 1.0, testutil.ToFloat64(m.fault.WithLabelValues("f", "link_down")))
	m.Observe(ledger.Event{Type: ledger.EventFaultStop, Fault: "f"})
	assert.Equal(t, 0.0, testutil.ToFloat64(m.fault.WithLabelValues("f", "link_down")), "fault_stop carries no type: the start's is used")
}

func TestRunLabelsOnEverySeries(t *testing.T) {
	m := NewMetrics(Labels{Scenario: "s", Shard: "2"}, true)
	feed(m)
	mfs, err := m.Gatherer().Gather()
	require.NoError(t, err)
	require.NotEmpty(t, mfs)
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range mt.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			assert.Equal(t, "2", got["shard"], mf.GetName())
			assert.Equal(t, "s", got["scenario"], mf.GetName())
		}
	}
}

func TestSeriesListsWhatIsExported(t *testing.T) {
	m := NewMetrics(Labels{Scenario: "s"}, false)
	feed(m)
	mfs, err := m.Gatherer().Gather()
	require.NoError(t, err)
	var got []string
	for _, ts := range toSeries(mfs, 0, nil) {
		got = append(got, ts.labels[0].value) // __name__ sorts first
	}
	for _, s := range Series() {
		assert.Contains(t, got, s)
	}
}

func ledgerDone() ledger.Event {
	return ledger.Event{Type: ledger.EventDone, Outcome: ledger.OutcomeOK}
}
