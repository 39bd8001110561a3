package reports

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// valid_responses judges what the server sent: an invalid body or a clean end without
// the protocol's end (truncated) fails it; a connection lost mid-response says nothing
// about the bytes that did arrive, so it does not (whether something explains the loss
// is another assertion's question).
func TestValidResponsesIgnoresConnectionLost(t *testing.T) {
	base := []ledger.Event{ev(ledger.EventRunStart, 0, func(e *ledger.Event) { e.Scenario = "v" })}
	tests := []struct {
		name string
		o    ledger.Outcome
		want State
	}{
		{"connection lost", ledger.OutcomeConnectionLost, StatePass},
		{"truncated", ledger.OutcomeTruncated, StateFail},
		{"invalid", ledger.OutcomeInvalid, StateFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := append(append([]ledger.Event{}, base...), done("a", 1, ledger.OutcomeOK), done("b", 2, tt.o))
			res := Compute(evs, Config{Assertions: []string{AssertValidResponses}})
			var got *AssertionResult
			for i := range res.Assertions {
				if res.Assertions[i].Name == AssertValidResponses {
					got = &res.Assertions[i]
				}
			}
			require.NotNil(t, got, "valid_responses evaluated")
			assert.Equal(t, tt.want, got.State, got.Detail)
		})
	}
}
