package reports

import (
	"strings"
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

func TestExplainedErrors(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	cfg := Config{Assertions: []string{AssertValidResponses, AssertExplainedErrors}}
	judge := func(evs []ledger.Event) (*Results, AssertionResult) {
		r := Compute(evs, cfg)
		for _, a := range r.Assertions {
			if a.Name == AssertExplainedErrors {
				return r, a
			}
		}
		t.Fatalf("no %s in %+v", AssertExplainedErrors, r.Assertions)
		return nil, AssertionResult{}
	}
	var evs []ledger.Event
	evs = append(evs, reqDone("ok1", ledger.OutcomeOK, at(1), at(2))...)

	t.Run("a reset with no fault fails", func(t *testing.T) {
		r, a := judge(explainedLedger(append(evs, reqDone("r1", ledger.OutcomeConnectionLost, at(2), at(3))...)...))
		assert.Equal(t, StateFail, a.State, a.Detail)
		assert.Equal(t, VerdictFail, r.Verdict)
		assert.Equal(t, 1, r.UnexplainedErrors)
		assert.Equal(t, map[string]int{ledger.CauseUnexplained: 1}, r.Causes)
		assert.Equal(t, map[string]int{ledger.CauseUnexplained: 1}, r.ByWorkload["agents"].Causes)
		// valid_responses does not judge a lost connection.
		assert.Equal(t, StatePass, r.Assertions[0].State)
		// The timeline marks it where it was scheduled, and the chart draws the mark.
		require.NotNil(t, r.Timeline())
		assert.Equal(t, []float64{1}, r.Timeline().Unexplained)
		svg, err := RenderSVG(Charts(r.Timeline())[0], 400, 200)
		require.NoError(t, err)
		assert.Contains(t, string(svg), "unexplained error (1)")
	})
	t.Run("a lost connection in a declared kill passes", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...),
			ledger.Event{Time: at(2), Type: ledger.EventFaultStart, Fault: "kill", FaultType: "process_kill", Target: "server"})
		l = append(l, reqDone("r1", ledger.OutcomeConnectionLost, at(1.5), at(2.1))...)
		l = append(l, reqDone("r2", ledger.OutcomeTransportError, at(2.5), at(2.6))...)
		l = append(l, reqDone("r3", ledger.OutcomeRejected, at(2.5), at(2.6))...)
		l = append(l, ledger.Event{Time: at(4), Type: ledger.EventFaultStop, Fault: "kill"})
		r, a := judge(explainedLedger(l...))
		assert.Equal(t, StatePass, a.State, a.Detail)
		assert.Equal(t, VerdictPass, r.Verdict)
		assert.Equal(t, map[string]int{"fault:kill": 2, ledger.CauseRefused: 1}, r.Causes)
		assert.Contains(t, a.Detail, "0 of 3 explicit errors unexplained")
	})
	t.Run("the recorded cause is used as written", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...), reqDone("r1", ledger.OutcomeHTTPError, at(2), at(3))...)
		l[len(l)-1].Cause = "fault:elsewhere"
		r, a := judge(explainedLedger(l...))
		assert.Equal(t, StatePass, a.State, a.Detail)
		assert.Equal(t, map[string]int{"fault:elsewhere": 1}, r.Causes)
	})
	t.Run("a rate bound tolerates a few", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...), reqDone("r1", ledger.OutcomeHTTPError, at(2), at(3))...)
		r := Compute(explainedLedger(l...), Config{Assertions: []string{"explained_errors(rate < 0.6)", "explained_errors(count <= 0)"}})
		require.Len(t, r.Assertions, 2)
		assert.Equal(t, StatePass, r.Assertions[0].State, r.Assertions[0].Detail)
		assert.Equal(t, StateFail, r.Assertions[1].State, r.Assertions[1].Detail)
	})
	t.Run("a target that went down and never came back fails", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...), ledger.Event{Time: at(6.1), Type: ledger.EventTargetDown, Source: "target"})
		r, a := judge(explainedLedger(l...))
		assert.Equal(t, StateFail, a.State)
		assert.Contains(t, a.Detail, "target went down at 6.1 s and did not come back")
		assert.Contains(t, strings.Join(r.Notes, "\n"), "target went down at 6.1 s and did not come back")
		require.Len(t, r.Liveness, 1)
		assert.Nil(t, r.Liveness[0].Up)
	})
	t.Run("without explained_errors a dead target still fails", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...), ledger.Event{Time: at(6.1), Type: ledger.EventTargetDown, Source: "target"})
		r := Compute(explainedLedger(l...), Config{Assertions: []string{AssertNoSilentDrops}})
		assert.Equal(t, VerdictFail, r.Verdict)
		assert.Equal(t, AssertTargetAlive, r.Assertions[len(r.Assertions)-1].Name)
	})
	t.Run("an outage inside a kill that ends is explained", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...),
			ledger.Event{Time: at(2), Type: ledger.EventFaultStart, Fault: "kill", FaultType: "process_kill", Target: "server"},
			ledger.Event{Time: at(2.2), Type: ledger.EventTargetDown, Source: "server"},
			ledger.Event{Time: at(4), Type: ledger.EventFaultStop, Fault: "kill"},
			ledger.Event{Time: at(5), Type: ledger.EventTargetUp, Source: "server"})
		r, a := judge(explainedLedger(l...))
		assert.Equal(t, StatePass, a.State, a.Detail)
		require.Len(t, r.Liveness, 1)
		assert.Equal(t, "kill", r.Liveness[0].Fault)
		assert.Empty(t, r.Notes)
	})
	t.Run("a kill declared without restart explains an outage that never ends", func(t *testing.T) {
		kill := func(params map[string]any) []ledger.Event {
			return append(append([]ledger.Event{}, evs...),
				ledger.Event{Time: at(2), Type: ledger.EventFaultStart, Fault: "kill-prefill", FaultType: "prefill_crash", Target: "prefill", Params: params},
				ledger.Event{Time: at(2.2), Type: ledger.EventTargetDown, Source: "prefill-0"},
				ledger.Event{Time: at(3), Type: ledger.EventFaultStop, Fault: "kill-prefill"})
		}
		r, a := judge(explainedLedger(kill(map[string]any{"restart": false})...))
		assert.Equal(t, StatePass, a.State, a.Detail)
		require.Len(t, r.Liveness, 1)
		assert.True(t, r.Liveness[0].Expected)
		assert.Contains(t, r.Liveness[0].Detail, "did not come back (fault kill-prefill, restart: false)")
		assert.Empty(t, r.Notes)
		// The same kill that was to restart the process, and did not: a failure.
		_, a = judge(explainedLedger(kill(nil)...))
		assert.Equal(t, StateFail, a.State)
		assert.Contains(t, a.Detail, "prefill-0 went down at 2.2 s and did not come back (fault kill-prefill)")
	})
	t.Run("an outage outside any fault fails even when it ends", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...),
			ledger.Event{Time: at(2.2), Type: ledger.EventTargetDown, Source: "target"},
			ledger.Event{Time: at(3), Type: ledger.EventTargetUp, Source: "target"})
		_, a := judge(explainedLedger(l...))
		assert.Equal(t, StateFail, a.State)
		assert.Contains(t, a.Detail, "target went down at 2.2 s and was back at 3.0 s, outside any declared fault")
	})
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
