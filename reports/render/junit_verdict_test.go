package render

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/internal/fixture"
)

// junitCounts decodes junit.xml as CI does and returns its failures and errors.
func junitCounts(t testing.TB, r *reports.Results) (failures, errors int) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteJUnit(&buf, r))
	var doc struct {
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Cases []struct {
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &doc), buf.String())
	var f, e int
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Failure != nil {
				f++
			}
			if c.Error != nil {
				e++
			}
		}
	}
	require.Equal(t, doc.Failures, f, "failures attribute")
	require.Equal(t, doc.Errors, e, "errors attribute")
	return f, e
}

// faultLedger has ok requests before and during a verified fault; stop and after say
// whether the fault was reverted and whether requests came after it.
func faultLedger(stop, after bool) []ledger.Event {
	evs := []ledger.Event{{Time: fixture.At(0), Type: ledger.EventRunStart, Scenario: "f", Seed: 1}}
	req := func(id string, at float64, o ledger.Outcome) {
		evs = append(evs, ledger.Event{Time: fixture.At(at), Type: ledger.EventScheduled, RequestID: id, Workload: "w"},
			ledger.Event{Time: fixture.At(at + 0.1), Type: ledger.EventDone, RequestID: id, Workload: "w", Outcome: o, E2E: 0.1})
	}
	req("r1", 0.5, ledger.OutcomeOK)
	evs = append(evs, ledger.Event{Time: fixture.At(1), Type: ledger.EventFaultStart, Fault: "k", FaultType: "delay", Target: "decode-0"},
		ledger.Event{Time: fixture.At(1.1), Type: ledger.EventFaultVerified, Fault: "k", Passed: ledger.Bool(true)})
	req("r2", 1.5, ledger.OutcomeOK)
	if stop {
		evs = append(evs, ledger.Event{Time: fixture.At(2), Type: ledger.EventFaultStop, Fault: "k"})
	}
	if after {
		for i := range 40 {
			req(fmt.Sprintf("a%d", i), 2.5+float64(i)*0.5, ledger.OutcomeOK)
		}
	}
	return append(evs, ledger.Event{Time: fixture.At(30), Type: ledger.EventRunEnd})
}

// TestJUnitFailsExactlyWhenVerdictIsNotPass: CI reads junit.xml, the CLI exits on the
// verdict; a fault's recovery cases must not turn a PASS red when recovery is not
// asserted, and must when it is.
func TestJUnitFailsExactlyWhenVerdictIsNotPass(t *testing.T) {
	tests := []struct {
		name        string
		stop, after bool
		assertions  []string
		want        reports.Verdict
	}{
		{"never reverted, recovery not asserted", false, true, nil, reports.VerdictPass},
		{"nothing after the stop, recovery not asserted", true, false, nil, reports.VerdictPass},
		{"recovered, recovery asserted", true, true, []string{reports.AssertRecovery}, reports.VerdictPass},
		{"never reverted, recovery asserted", false, true, []string{reports.AssertRecovery}, reports.VerdictInvalid},
		{"nothing after the stop, recovery asserted", true, false, []string{reports.AssertRecovery}, reports.VerdictInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reports.Compute(faultLedger(tt.stop, tt.after), reports.Config{Assertions: tt.assertions})
			require.Equal(t, tt.want, r.Verdict, "%v %v", r.InvalidReasons, r.Assertions)
			f, e := junitCounts(t, r)
			require.Equal(t, r.Verdict != reports.VerdictPass, f+e > 0, "verdict %s, junit failures %d errors %d", r.Verdict, f, e)
		})
	}
}
