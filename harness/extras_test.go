package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// TestBurstSendsItsExtras: a queue_saturation burst goes out through workload.Extras
// (the sim's too): exactly its requests, numbered from 0 under the burst's own name,
// each with one terminal outcome in the ledger, on a real loopback server.
func TestBurstSendsItsExtras(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 3*time.Second, scenarios.Workload{Name: "agents", Type: "agents",
		Agents: 1, Turns: 1000, ThinkTime: scenarios.Duration(50 * time.Millisecond)})
	generousDeadlines(sc)
	sc.Faults = []scenarios.Fault{{Name: "storm", Type: "queue_saturation", Target: "agents",
		At: scenarios.Duration(500 * time.Millisecond), For: scenarios.Duration(2 * time.Second),
		Params: map[string]any{"requests": 12, "concurrency": 3}}}
	dir := t.TempDir()
	// This server has no queue gauges, so chaos cannot prove the pressure; the run is an
	// infrastructure failure, but its burst statistics are what Extras sent.
	err := Run(context.Background(), sc, Options{OutDir: dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "burst sent 12/12, done 12")
	evs := readLedger(t, dir)
	checkOneTerminal(t, evs)
	var ids []string
	for _, ev := range evs {
		if ev.Type == ledger.EventScheduled && strings.Contains(ev.RequestID, "-burst") {
			ids = append(ids, ev.RequestID)
		}
	}
	require.Len(t, ids, 12, "the burst's requests: %v", ids)
	for _, id := range ids {
		assert.True(t, strings.HasPrefix(id, "agents-burst1-0000"), id)
	}
}
