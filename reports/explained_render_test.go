package reports_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
)

func TestExplainedErrors(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	cfg := reports.Config{Assertions: []string{reports.AssertValidResponses, reports.AssertExplainedErrors}}
	judge := func(evs []ledger.Event) (*reports.Results, reports.AssertionResult) {
		r := reports.Compute(evs, cfg)
		for _, a := range r.Assertions {
			if a.Name == reports.AssertExplainedErrors {
				return r, a
			}
		}
		t.Fatalf("no %s in %+v", reports.AssertExplainedErrors, r.Assertions)
		return nil, reports.AssertionResult{}
	}
	var evs []ledger.Event
	evs = append(evs, reports.ReqDone("ok1", ledger.OutcomeOK, at(1), at(2))...)

	t.Run("a reset with no fault fails", func(t *testing.T) {
		r, a := judge(reports.ExplainedLedger(append(evs, reports.ReqDone("r1", ledger.OutcomeConnectionLost, at(2), at(3))...)...))
		assert.Equal(t, reports.StateFail, a.State, a.Detail)
		assert.Equal(t, reports.VerdictFail, r.Verdict)
		assert.Equal(t, 1, r.UnexplainedErrors)
		assert.Equal(t, map[string]int{ledger.CauseUnexplained: 1}, r.Causes)
		assert.Equal(t, map[string]int{ledger.CauseUnexplained: 1}, r.ByWorkload["agents"].Causes)
		// valid_responses does not judge a lost connection.
		assert.Equal(t, reports.StatePass, r.Assertions[0].State)
		// The timeline marks it where it was scheduled, and the chart draws the mark.
		require.NotNil(t, r.Timeline())
		assert.Equal(t, []float64{1}, r.Timeline().Unexplained)
		svg, err := render.RenderSVG(render.Charts(r.Timeline())[0], 400, 200)
		require.NoError(t, err)
		assert.Contains(t, string(svg), "unexplained error (1)")
	})
	t.Run("a lost connection in a declared kill passes", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...),
			ledger.Event{Time: at(2), Type: ledger.EventFaultStart, Fault: "kill", FaultType: "process_kill", Target: "server"})
		l = append(l, reports.ReqDone("r1", ledger.OutcomeConnectionLost, at(1.5), at(2.1))...)
		l = append(l, reports.ReqDone("r2", ledger.OutcomeTransportError, at(2.5), at(2.6))...)
		l = append(l, reports.ReqDone("r3", ledger.OutcomeRejected, at(2.5), at(2.6))...)
		l = append(l, ledger.Event{Time: at(4), Type: ledger.EventFaultStop, Fault: "kill"})
		r, a := judge(reports.ExplainedLedger(l...))
		assert.Equal(t, reports.StatePass, a.State, a.Detail)
		assert.Equal(t, reports.VerdictPass, r.Verdict)
		assert.Equal(t, map[string]int{"fault:kill": 2, ledger.CauseRefused: 1}, r.Causes)
		assert.Contains(t, a.Detail, "0 of 3 explicit errors unexplained")
	})
	t.Run("the recorded cause is used as written", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...), reports.ReqDone("r1", ledger.OutcomeHTTPError, at(2), at(3))...)
		l[len(l)-1].Cause = "fault:elsewhere"
		r, a := judge(reports.ExplainedLedger(l...))
		assert.Equal(t, reports.StatePass, a.State, a.Detail)
		assert.Equal(t, map[string]int{"fault:elsewhere": 1}, r.Causes)
	})
	t.Run("an unexplained cause written before its fault's start is judged again", func(t *testing.T) {
		// The kill cut the stream while Apply ran: the runner wrote the done event
		// (cause unexplained, no fault known yet) before fault_start, which carries
		// the time Apply began.
		l := append(append([]ledger.Event{}, evs...), reports.ReqDone("r1", ledger.OutcomeConnectionLost, at(1.5), at(2.05))...)
		l[len(l)-1].Cause = ledger.CauseUnexplained
		l = append(l, ledger.Event{Time: at(2), Type: ledger.EventFaultStart, Fault: "kill", FaultType: "process_kill", Target: "server"},
			ledger.Event{Time: at(4), Type: ledger.EventFaultStop, Fault: "kill"})
		r, a := judge(reports.ExplainedLedger(l...))
		assert.Equal(t, reports.StatePass, a.State, a.Detail)
		assert.Equal(t, map[string]int{"fault:kill": 1}, r.Causes)
	})
	t.Run("a rate bound tolerates a few", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...), reports.ReqDone("r1", ledger.OutcomeHTTPError, at(2), at(3))...)
		r := reports.Compute(reports.ExplainedLedger(l...), reports.Config{Assertions: []string{"explained_errors(rate < 0.6)", "explained_errors(count <= 0)"}})
		require.Len(t, r.Assertions, 2)
		assert.Equal(t, reports.StatePass, r.Assertions[0].State, r.Assertions[0].Detail)
		assert.Equal(t, reports.StateFail, r.Assertions[1].State, r.Assertions[1].Detail)
	})
	t.Run("a target that went down and never came back fails", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...), ledger.Event{Time: at(6.1), Type: ledger.EventTargetDown, Source: "target"})
		r, a := judge(reports.ExplainedLedger(l...))
		assert.Equal(t, reports.StateFail, a.State)
		assert.Contains(t, a.Detail, "target went down at 6.1 s and did not come back")
		assert.Contains(t, strings.Join(r.Notes, "\n"), "target went down at 6.1 s and did not come back")
		require.Len(t, r.Liveness, 1)
		assert.Nil(t, r.Liveness[0].Up)
	})
	t.Run("without explained_errors a dead target still fails", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...), ledger.Event{Time: at(6.1), Type: ledger.EventTargetDown, Source: "target"})
		r := reports.Compute(reports.ExplainedLedger(l...), reports.Config{Assertions: []string{reports.AssertNoSilentDrops}})
		assert.Equal(t, reports.VerdictFail, r.Verdict)
		assert.Equal(t, reports.AssertTargetAlive, r.Assertions[len(r.Assertions)-1].Name)
	})
	t.Run("an outage inside a kill that ends is explained", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...),
			ledger.Event{Time: at(2), Type: ledger.EventFaultStart, Fault: "kill", FaultType: "process_kill", Target: "server"},
			ledger.Event{Time: at(2.2), Type: ledger.EventTargetDown, Source: "server"},
			ledger.Event{Time: at(4), Type: ledger.EventFaultStop, Fault: "kill"},
			ledger.Event{Time: at(5), Type: ledger.EventTargetUp, Source: "server"})
		r, a := judge(reports.ExplainedLedger(l...))
		assert.Equal(t, reports.StatePass, a.State, a.Detail)
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
		r, a := judge(reports.ExplainedLedger(kill(map[string]any{"restart": false})...))
		assert.Equal(t, reports.StatePass, a.State, a.Detail)
		require.Len(t, r.Liveness, 1)
		assert.True(t, r.Liveness[0].Expected)
		assert.Contains(t, r.Liveness[0].Detail, "did not come back (fault kill-prefill, restart: false)")
		assert.Empty(t, r.Notes)
		// The same kill that was to restart the process, and did not: a failure.
		_, a = judge(reports.ExplainedLedger(kill(nil)...))
		assert.Equal(t, reports.StateFail, a.State)
		assert.Contains(t, a.Detail, "prefill-0 went down at 2.2 s and did not come back (fault kill-prefill)")
	})
	t.Run("a kill declared without restart excuses only what it killed", func(t *testing.T) {
		// prefill-0 is killed for good; the router dies meanwhile on its own and stays
		// dead: the kill's restart: false is no excuse for the router.
		l := append(append([]ledger.Event{}, evs...),
			ledger.Event{Time: at(2), Type: ledger.EventFaultStart, Fault: "kill-prefill", FaultType: "prefill_crash", Target: "prefill", Params: map[string]any{"restart": false}},
			ledger.Event{Time: at(2.2), Type: ledger.EventTargetDown, Source: "prefill-0"},
			ledger.Event{Time: at(2.5), Type: ledger.EventTargetDown, Source: "router"},
			ledger.Event{Time: at(3), Type: ledger.EventFaultStop, Fault: "kill-prefill"})
		r, a := judge(reports.ExplainedLedger(l...))
		assert.Equal(t, reports.StateFail, a.State, a.Detail)
		require.Len(t, r.Liveness, 2)
		assert.True(t, r.Liveness[0].Expected, "%+v", r.Liveness[0])
		assert.False(t, r.Liveness[1].Expected, "%+v", r.Liveness[1])
		assert.Contains(t, a.Detail, "router went down at 2.5 s and did not come back")
		assert.NotContains(t, a.Detail, "prefill-0")
	})
	t.Run("the fault aimed at a source explains its outage before another active one", func(t *testing.T) {
		// A slow link is on when prefill-0 is killed for good: the kill, not the link,
		// explains prefill-0's outage, and it was declared never to end.
		l := append(append([]ledger.Event{}, evs...),
			ledger.Event{Time: at(1), Type: ledger.EventFaultStart, Fault: "slow", FaultType: "network_latency", Target: "router->decode"},
			ledger.Event{Time: at(2), Type: ledger.EventFaultStart, Fault: "kill-prefill", FaultType: "prefill_crash", Target: "prefill", Params: map[string]any{"restart": false}},
			ledger.Event{Time: at(2.2), Type: ledger.EventTargetDown, Source: "prefill-0"},
			ledger.Event{Time: at(3), Type: ledger.EventFaultStop, Fault: "kill-prefill"},
			ledger.Event{Time: at(5), Type: ledger.EventFaultStop, Fault: "slow"})
		r, a := judge(reports.ExplainedLedger(l...))
		assert.Equal(t, reports.StatePass, a.State, a.Detail)
		require.Len(t, r.Liveness, 1)
		assert.Equal(t, "kill-prefill", r.Liveness[0].Fault)
		assert.True(t, r.Liveness[0].Expected)
	})
	t.Run("an outage outside any fault fails even when it ends", func(t *testing.T) {
		l := append(append([]ledger.Event{}, evs...),
			ledger.Event{Time: at(2.2), Type: ledger.EventTargetDown, Source: "target"},
			ledger.Event{Time: at(3), Type: ledger.EventTargetUp, Source: "target"})
		_, a := judge(reports.ExplainedLedger(l...))
		assert.Equal(t, reports.StateFail, a.State)
		assert.Contains(t, a.Detail, "target went down at 2.2 s and was back at 3.0 s, outside any declared fault")
	})
}
