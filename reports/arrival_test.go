package reports

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// TestArrivalCurve: scheduled and sent requests of a trace workload, bucketed by second
// from the run's start; other workloads and unnamed ones get no curve.
func TestArrivalCurve(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var evs []ledger.Event
	evs = append(evs, ledger.Event{Type: ledger.EventRunStart, Time: t0})
	req := func(w, id string, sched, sent int) {
		s := at(sched)
		evs = append(evs,
			ledger.Event{Type: ledger.EventScheduled, Time: s, RequestID: id, Workload: w},
			ledger.Event{Type: ledger.EventSent, Time: at(sent), RequestID: id, Workload: w, Scheduled: &s})
	}
	req("tr", "a", 100, 110)
	req("tr", "b", 900, 1300) // due in second 0, sent in second 1: the harness fell behind
	req("tr", "c", 2500, 2501)
	req("other", "x", 100, 100)
	r := Compute(evs, Config{ArrivalWorkloads: []string{"tr", "absent"}})
	require.Len(t, r.Arrivals, 1)
	c := r.Arrivals[0]
	assert.Equal(t, "tr", c.Workload)
	assert.Equal(t, 1.0, c.BucketSeconds)
	assert.Equal(t, []int{2, 0, 1}, c.Scheduled)
	assert.Equal(t, []int{1, 1, 1}, c.Sent)
	assert.InDelta(t, 0.4, c.MaxLagSeconds, 1e-9)
	assert.Empty(t, Compute(evs, Config{}).Arrivals, "no trace workloads, no curves")
}

func TestArrivalCurveLongRunWidensBuckets(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var a arrivals
	for k := 0; k < 600; k++ {
		s := t0.Add(time.Duration(k) * time.Second)
		a.add(ledger.Event{Type: ledger.EventScheduled, Time: s, Workload: "tr"}, []string{"tr"})
		a.add(ledger.Event{Type: ledger.EventSent, Time: s, Workload: "tr", Scheduled: &s}, []string{"tr"})
	}
	c := a.curves(t0, []string{"tr"})
	require.Len(t, c, 1)
	assert.LessOrEqual(t, len(c[0].Scheduled), maxArrivalBuckets+1)
	total := 0
	for _, n := range c[0].Scheduled {
		total += n
	}
	assert.Equal(t, 600, total, "every request in some bucket")
}
