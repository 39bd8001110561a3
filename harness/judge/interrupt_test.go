package judge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pdsoak/harness/client"
	"pdsoak/ledger"
)

func TestAtInterrupt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time {
		if s < 0 {
			return time.Time{}
		}
		return t0.Add(time.Duration(s * float64(time.Second)))
	}
	d := client.Deadlines{FirstToken: 10 * time.Second, Total: 30 * time.Second}
	for _, tc := range []struct {
		name                 string
		stream               bool
		sent, headers, first float64
		now                  float64
		want                 ledger.Outcome
		phase                ledger.Phase
		bound                string
	}{
		{"never sent", true, -1, -1, -1, 5, ledger.OutcomeUnresolved, ledger.PhaseConnect, ""},
		{"held 8 s of a 10 s first-token bound", true, 0, -1, -1, 8, ledger.OutcomeUnresolved, ledger.PhaseBeforeHeaders, ""},
		{"past its first-token bound", true, 0, 1, -1, 11, ledger.OutcomeDeadlineExceeded, ledger.PhaseBeforeFirstToken, "first_token"},
		{"streaming, within the total", true, 0, 1, 2, 20, ledger.OutcomeUnresolved, ledger.PhaseMidStream, ""},
		{"past the total", true, 0, 1, 2, 31, ledger.OutcomeDeadlineExceeded, ledger.PhaseMidStream, "total"},
		{"no stream: the first-token bound does not apply", false, 0, -1, -1, 11, ledger.OutcomeUnresolved, ledger.PhaseBeforeHeaders, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, phase, bound := AtInterrupt(d, tc.stream, at(tc.sent), at(tc.headers), at(tc.first), at(tc.now))
			assert.Equal(t, []any{tc.want, tc.phase, tc.bound}, []any{o, phase, bound})
		})
	}
}
