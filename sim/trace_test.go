package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/traceparent"
)

// TestTraceIDsAsTheRealHarness: a simulated run records the trace ids a real run of the
// same scenario and seed sends (traceparent.Derive of the seed and request id).
func TestTraceIDsAsTheRealHarness(t *testing.T) {
	yaml := `
name: sim-traces
seed: 13
duration: 5s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: agents, type: agents, agents: 2, turns: 2, max_tokens: 3}
`
	evs, _, _, err := simulate(t, parse(t, yaml), planBy(nil))
	require.NoError(t, err)
	n := 0
	for _, e := range evs {
		if e.Type == ledger.EventDone || e.Type == ledger.EventScheduled {
			n++
			assert.Equal(t, traceparent.Derive(13, e.RequestID).TraceIDHex(), e.TraceID, "%s %s", e.Type, e.RequestID)
		}
	}
	assert.Equal(t, 8, n)
}
