package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
)

// TestFaultCases: each fault gives verified, recovered and time_to_recover cases whose
// state, duration and text follow the fault's result.
func TestFaultCases(t *testing.T) {
	tests := []struct {
		name      string
		f         reports.FaultResult
		problems  [3]string // "", "failure" or "error" per case
		times     [3]string
		textHasIn string
	}{
		{name: "verified and recovered", f: reports.FaultResult{Name: "k", Type: "kill", Target: "decode-0", Start: 5, Stop: reports.Float(9.5),
			Verified: ledger.Bool(true), Recovered: ledger.Bool(true), TimeToRecover: reports.Float(2.25)},
			times: [3]string{"4.500", "2.250", "2.250"}},
		{name: "not recovered is a failure", f: reports.FaultResult{Name: "k", Start: 5, Stop: reports.Float(6), Verified: ledger.Bool(true), Recovered: ledger.Bool(false)},
			problems: [3]string{"", "failure", "failure"}, times: [3]string{"1.000", "0", "0"}, textHasIn: "did not recover"},
		{name: "not verified is an error", f: reports.FaultResult{Name: "k", Start: 5, Stop: reports.Float(6), Verified: ledger.Bool(false), Detail: "no effect seen",
			Recovered: ledger.Bool(true), TimeToRecover: reports.Float(0)}, problems: [3]string{"error", "", ""}, times: [3]string{"1.000", "0.000", "0.000"}, textHasIn: "no effect seen"},
		{name: "never reverted is not measurable", f: reports.FaultResult{Name: "k", Start: 5},
			problems: [3]string{"", "error", "error"}, times: [3]string{"0", "0", "0"}, textHasIn: "never reverted"},
		{name: "no requests after is not measurable", f: reports.FaultResult{Name: "k", Start: 5, Stop: reports.Float(6)},
			problems: [3]string{"", "error", "error"}, times: [3]string{"1.000", "0", "0"}, textHasIn: "no requests after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cases := faultCases(tt.f, "pdsoak.x", true)
			require.Len(t, cases, 3)
			for i, c := range cases {
				got := ""
				text := c.SystemOut
				switch {
				case c.Failure != nil:
					got, text = "failure", c.Failure.Text
				case c.Error != nil:
					got, text = "error", c.Error.Text
				}
				assert.Equal(t, tt.problems[i], got, c.Name)
				assert.Equal(t, tt.times[i], c.Time, c.Name)
				assert.Contains(t, text, reports.HTMLFile, c.Name)
				if tt.problems[i] != "" {
					assert.Contains(t, text, tt.textHasIn, c.Name)
				}
			}
			assert.Equal(t, "fault k: verified", cases[0].Name)
		})
	}
}
