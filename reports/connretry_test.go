package reports

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// TestConnRetriesCountedAndNoted: done events whose request was re-sent after a reused
// connection ended before any byte (conn_retry) are counted in results and said in a note,
// since each may have reached the server twice; a run without any says nothing.
func TestConnRetriesCountedAndNoted(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	build := func(retries ...int) *Results {
		b := NewBuilder(Config{})
		b.Add(ledger.Event{Time: t0, Type: ledger.EventRunStart, Scenario: "s"})
		for i, n := range retries {
			id := "w-" + string(rune('a'+i))
			b.Add(ledger.Event{Time: t0, Type: ledger.EventScheduled, RequestID: id})
			b.Add(ledger.Event{Time: t0.Add(time.Second), Type: ledger.EventDone, RequestID: id, Outcome: ledger.OutcomeOK, ConnRetry: n})
		}
		b.Add(ledger.Event{Time: t0.Add(2 * time.Second), Type: ledger.EventRunEnd})
		return b.Results()
	}
	r := build(0, 1, 0, 1, 1, 1)
	assert.Equal(t, 4, r.ConnRetries)
	require.Len(t, r.Notes, 1)
	assert.Contains(t, r.Notes[0], "4 requests were re-sent once on a fresh connection")
	assert.Contains(t, r.Notes[0], "(e.g. w-b, w-d, w-e)")
	assert.Contains(t, r.Notes[0], "saw it twice")

	r = build(0, 0)
	assert.Zero(t, r.ConnRetries)
	assert.Empty(t, r.Notes)
}
