package reports

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

func TestCause(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	kill := FaultWindow{Name: "kill", Type: "process_kill", Target: "server", Start: at(10), Stop: at(15)}
	cut := FaultWindow{Name: "cut", Type: "client_disconnect", Target: "agents", Start: at(0), Stop: at(30)}
	open := FaultWindow{Name: "hold", Type: "process_pause", Target: "decode", Start: at(40)}
	faults := []FaultWindow{cut, kill, open}
	onlyDecode := func(target string) bool { return target == "decode" }
	for _, tc := range []struct {
		name       string
		o          ledger.Outcome
		start, end float64
		serves     func(string) bool
		want       string
	}{
		{"ok has no cause", ledger.OutcomeOK, 11, 12, nil, ""},
		{"429 is a refusal even in a fault", ledger.OutcomeRejected, 11, 12, nil, ledger.CauseRefused},
		{"lost during the kill", ledger.OutcomeConnectionLost, 9, 11, nil, "fault:kill"},
		{"began within the margin after the kill", ledger.OutcomeTransportError, 24, 24.1, nil, "fault:kill"},
		{"began past the margin", ledger.OutcomeTransportError, 26, 26.1, nil, ledger.CauseUnexplained},
		{"ended before the kill", ledger.OutcomeConnectionLost, 5, 9.9, nil, ledger.CauseUnexplained},
		{"reset with no fault", ledger.OutcomeConnectionLost, 31, 32, nil, ledger.CauseUnexplained},
		{"a kill of what does not serve it", ledger.OutcomeHTTPError, 11, 12, onlyDecode, ledger.CauseUnexplained},
		{"a fault still active at the end", ledger.OutcomeStreamError, 50, 51, onlyDecode, "fault:hold"},
		{"cancelled by the disconnect fault", ledger.OutcomeCancelled, 1, 2, nil, "fault:cut"},
		{"cancelled by the harness", ledger.OutcomeCancelled, 45, 46, func(string) bool { return false }, ledger.CauseClient},
		{"a client fault explains no server error", ledger.OutcomeHTTPError, 1, 2, nil, ledger.CauseUnexplained},
		{"interrupted", ledger.OutcomeUnresolved, 1, 2, nil, ledger.CauseClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Cause(CauseRequest{Outcome: tc.o, Start: at(tc.start), End: at(tc.end), Serves: tc.serves}, faults, DefaultCauseMargin)
			assert.Equal(t, tc.want, got)
		})
	}

	// A fault still acting outranks an earlier one whose margin also covers the request
	// (a partition, then link resets: an error during the resets is theirs).
	part := FaultWindow{Name: "partition", Type: "network_partition", Target: "l", Start: at(2), Stop: at(4)}
	resets := FaultWindow{Name: "resets", Type: "connection_reset", Target: "l", Start: at(4.5), Stop: at(5.5)}
	both := []FaultWindow{part, resets}
	cause := func(start, end float64) string {
		return Cause(CauseRequest{Outcome: ledger.OutcomeTransportError, Start: at(start), End: at(end)}, both, DefaultCauseMargin)
	}
	assert.Equal(t, "fault:partition", cause(3, 3.1), "during the partition")
	assert.Equal(t, "fault:resets", cause(4.8, 4.9), "during the resets, in the partition's margin")
	assert.Equal(t, "fault:partition", cause(4.1, 4.2), "after the partition, before the resets")
	assert.Equal(t, "fault:partition", cause(6, 6.1), "after both: the first in the margin")
}

// explainedLedger is a run of 4 s: an ok request, then the given extra events.
func explainedLedger(extra ...ledger.Event) []ledger.Event {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := []ledger.Event{{Time: t0, Type: ledger.EventRunStart, Scenario: "x"}}
	for i, e := range extra {
		if e.Time.IsZero() {
			e.Time = t0.Add(time.Duration(i+1) * time.Second)
		}
		evs = append(evs, e)
	}
	return append(evs, ledger.Event{Time: t0.Add(20 * time.Second), Type: ledger.EventRunEnd})
}

func reqDone(id string, o ledger.Outcome, sched, end time.Time) []ledger.Event {
	return []ledger.Event{
		{Time: sched, Type: ledger.EventScheduled, RequestID: id, Workload: "agents"},
		{Time: end, Type: ledger.EventDone, RequestID: id, Workload: "agents", Outcome: o, Scheduled: &sched},
	}
}

func TestParseExplained(t *testing.T) {
	for _, s := range []string{"explained_errors", "explained_errors(rate < 0.001)", "explained_errors(count <= 3)"} {
		a, err := ParseAssertion(s)
		require.NoError(t, err, s)
		assert.True(t, a.Explained(), s)
		assert.Equal(t, s, a.String())
	}
	for _, s := range []string{"explained_errors(rate < 2)", "explained_errors(count < 1.5)", "explained_errors(p99 < 1)", "explained_errors(rate > 0.1)", "explained_errors(rate < x)", "explained_errors(rate < 0.1"} {
		_, err := ParseAssertion(s)
		assert.Error(t, err, s)
	}
	_, err := ParseAssertion("explained_erors")
	assert.ErrorContains(t, err, `did you mean "explained_errors"`)
}

func FuzzParseExplained(f *testing.F) {
	for _, s := range []string{"explained_errors", "explained_errors(rate < 0.001)", "explained_errors(count <= 3)", "explained_errors(", "explained_errors(rate<"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAssertion(s)
		if err != nil || !a.Explained() {
			return
		}
		b, err := ParseAssertion(a.String())
		require.NoError(t, err, "normalised %q does not parse", a.String())
		require.Equal(t, a.Name, b.Name)
	})
}
