package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pdsoak/ledger"
)

// TestReconnects steps the back-off rule both the real and the simulated agents use.
func TestReconnects(t *testing.T) {
	tests := []struct {
		name     string
		outcomes []ledger.Outcome
		waits    []time.Duration // one per re-send decided
		ids      []string
	}{
		{name: "answered: no re-send", outcomes: []ledger.Outcome{ledger.OutcomeOK}},
		{name: "an error answer is the turn's answer", outcomes: []ledger.Outcome{ledger.OutcomeHTTPError}},
		{name: "a refusal is retry's, not the back-off's", outcomes: []ledger.Outcome{ledger.OutcomeRejected}},
		{
			name:     "refused connections double to the cap",
			outcomes: []ledger.Outcome{ledger.OutcomeTransportError, ledger.OutcomeTransportError, ledger.OutcomeConnectionLost, ledger.OutcomeTransportError, ledger.OutcomeTransportError, ledger.OutcomeTransportError, ledger.OutcomeOK},
			waits:    []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second},
			ids:      []string{"t-x1", "t-x2", "t-x3", "t-x4", "t-x5", "t-x6"},
		},
		{
			name:     "a refused re-send ends the back-off",
			outcomes: []ledger.Outcome{ledger.OutcomeConnectionLost, ledger.OutcomeRejected},
			waits:    []time.Duration{250 * time.Millisecond},
			ids:      []string{"t-x1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Reconnects
			var waits []time.Duration
			var ids []string
			for i, o := range tt.outcomes {
				wait, id, again := b.After("t", o)
				if !again {
					assert.Equal(t, len(tt.outcomes)-1, i, "the back-off ends only at the last outcome")
					break
				}
				assert.True(t, b.Active())
				waits, ids = append(waits, wait), append(ids, id)
			}
			assert.Equal(t, tt.waits, waits)
			assert.Equal(t, tt.ids, ids)
		})
	}
}
