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

// TestSaturationProvedByWaiting: from the client, queue_saturation is proved by a
// stream of the burst served to its end while another sent with it still waited for
// its first token. A server that takes two streams at a time (the rest wait for a slot)
// shows it; one that streams the whole burst at once does not, and with no refusals
// or gauges to read the fault is not proved: requests in flight are no queue.
func TestSaturationProvedByWaiting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots int
	}{{"two at a time", 2}, {"all at once", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBadServer(t, []string{"slow_ok"})
			if tc.slots > 0 {
				b.slots = make(chan struct{}, tc.slots)
			}
			sc := testScenario(b.srv.URL, 3*time.Second, scenarios.Workload{Name: "agents", Type: "agents",
				Agents: 1, Turns: 1000, ThinkTime: scenarios.Duration(200 * time.Millisecond)})
			generousDeadlines(sc)
			sc.Faults = []scenarios.Fault{{Name: "storm", Type: "queue_saturation", Target: "agents",
				At: scenarios.Duration(500 * time.Millisecond), For: scenarios.Duration(2 * time.Second),
				Params: map[string]any{"requests": 8}}}
			dir := t.TempDir()
			err := Run(context.Background(), sc, Options{OutDir: dir})
			var evidence string
			for _, ev := range readLedger(t, dir) {
				if ev.Type == ledger.EventFaultVerified && ev.Fault == "storm" && ev.Passed != nil && *ev.Passed {
					evidence = ev.Detail
				}
			}
			if tc.slots > 0 {
				require.NoError(t, err)
				assert.Regexp(t, `burst of 8 sent at once: a stream was served to its end while [1-7] others sent with it had no first token yet`, evidence)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "no stream was served to its end while another sent with it waited for its first token")
			assert.Empty(t, evidence)
		})
	}
}
