package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/client"
	"pdsoak/harness/judge"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/reports"
)

// lostPlan: the first turn's connection is refused twice, the second turn's is reset
// mid-stream once; every re-send after that is answered.
var lostPlan = map[string]behaviour{
	"ag-s001-t001":    {refuse: ErrConnRefused},
	"ag-s001-t001-x1": {hangAfter: -1, failAfter: 0, failErr: ErrConnReset},
	"ag-s001-t001-x2": okBehaviour(),
	"ag-s001-t002":    {tokens: 4, gap: 10 * time.Millisecond, hangAfter: -1, failAfter: 2, failErr: ErrConnReset},
	"ag-s001-t002-x1": okBehaviour(),
}

const backoffYAML = `
name: sim-backoff
seed: 3
duration: 20s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: ag, type: agents, agents: 1, turns: 2, max_tokens: 4, retries: 2}
deadlines: {connect: 2s, first_token: 3s, stall: 1s, total: 5s}
assertions: [no_silent_drops]
`

// outcomeSender answers the real agents with the outcome the simulator's fake gives
// each id under lostPlan, without a server: the real driver's side of the comparison.
type outcomeSender struct {
	mu  sync.Mutex
	ids []string
}

func (s *outcomeSender) Send(_ context.Context, r *workload.Req) *client.Result {
	s.mu.Lock()
	s.ids = append(s.ids, r.ID)
	s.mu.Unlock()
	o := ledger.OutcomeOK
	switch b := lostPlan[r.ID]; {
	case b.refuse != nil, b.failErr != nil && b.failAfter == 0:
		o = ledger.OutcomeTransportError
	case b.failErr != nil:
		o = ledger.OutcomeConnectionLost
	}
	return &client.Result{ID: r.ID, Outcome: o, Text: "reply"}
}

// TestAgentsBackOffAsRealAgents: a simulated agent whose connection is refused or lost
// re-sends the same turn after workload.ReconnectWait (250 ms, then 500 ms, ...), under
// the same ids the real agent uses for the same outcomes, instead of burning its turns.
func TestAgentsBackOffAsRealAgents(t *testing.T) {
	sc := parse(t, backoffYAML)
	evs, _, _, err := simulate(t, sc, planBy(lostPlan))
	require.NoError(t, err)
	done := doneByID(evs)
	var simIDs []string
	sent := map[string]time.Time{}
	for _, e := range ofType(evs, ledger.EventSent) {
		simIDs = append(simIDs, e.RequestID)
		sent[e.RequestID] = e.Time
	}
	want := []string{"ag-s001-t001", "ag-s001-t001-x1", "ag-s001-t001-x2", "ag-s001-t002", "ag-s001-t002-x1"}
	require.Equal(t, want, simIDs)
	assert.Equal(t, ledger.OutcomeTransportError, done["ag-s001-t001"].Outcome)
	assert.Equal(t, ledger.OutcomeTransportError, done["ag-s001-t001-x1"].Outcome)
	assert.Equal(t, ledger.OutcomeConnectionLost, done["ag-s001-t002"].Outcome)
	assert.Equal(t, ledger.OutcomeOK, done["ag-s001-t002-x1"].Outcome)
	// The waits on the virtual clock are the rule's, from each failed attempt's end.
	assert.Equal(t, workload.ReconnectWait(1), sent["ag-s001-t001-x1"].Sub(done["ag-s001-t001"].Time))
	assert.Equal(t, workload.ReconnectWait(2), sent["ag-s001-t001-x2"].Sub(done["ag-s001-t001-x1"].Time))
	assert.Equal(t, workload.ReconnectWait(1), sent["ag-s001-t002-x1"].Sub(done["ag-s001-t002"].Time))

	// The real agents, fed the same outcomes, send the same requests.
	w, err := workload.New(sc, 0)
	require.NoError(t, err)
	real := &outcomeSender{}
	w.Run(context.Background(), time.Now(), real)
	assert.Equal(t, simIDs, real.ids, "real and simulated agents back off alike")
}

// TestAgentsBackOffUntilTheWindowEnds: a target that refuses every connection costs the
// simulated agent one attempt per back-off step (doubling to 4 s), not a turn per
// instant, and the session ends with its window.
func TestAgentsBackOffUntilTheWindowEnds(t *testing.T) {
	sc := parse(t, backoffYAML)
	evs, _, _, err := simulate(t, sc, func(string) behaviour { return behaviour{refuse: ErrConnRefused} })
	require.NoError(t, err)
	// 20 s window: the first send at 0, then re-sends after 0.25+0.5+1+2+4+4+4+4 = 19.75 s.
	var ids []string
	for _, e := range ofType(evs, ledger.EventSent) {
		ids = append(ids, e.RequestID)
	}
	require.Len(t, ids, 9, "%v", ids)
	assert.Equal(t, "ag-s001-t001-x8", ids[8], "one turn, re-sent until the window ended")
}

// TestSimLedgerCauses: the simulator's done events carry the cause the real runner would
// write (reports.Cause over the faults seen so far), and the report counts the same
// causes whether it reads them from the ledger or recomputes them.
func TestSimLedgerCauses(t *testing.T) {
	sc := parse(t, `
name: sim-causes
seed: 5
duration: 25s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: steady, type: open_loop, pacer: {type: constant, rate: 10}, max_tokens: 8}
faults:
  - {name: stall, type: scheduler_stall, target: decode, at: 2s, for: 1s}
  - {name: aborts, type: client_disconnect, target: steady, at: 20s, for: 2s, params: {after_tokens: 3}}
deadlines: {first_token: 2s, stall: 1s, total: 5s}
assertions: [no_silent_drops, explained_errors]
`)
	plan := planBy(map[string]behaviour{
		"steady-000080": {refuse: ErrConnRefused}, // 8 s: within the stall's margin (10 s after it)
		// 15 and 16 s: past the margin, before the aborts: nothing explains them.
		"steady-000150": {refuse: ErrConnRefused},
		"steady-000160": {tokens: 8, gap: 10 * time.Millisecond, hangAfter: -1, failAfter: 2, failErr: ErrConnReset},
	})
	evs, _, _, err := simulate(t, sc, plan)
	require.NoError(t, err)
	done := doneByID(evs)
	assert.Equal(t, "fault:stall", done["steady-000080"].Cause)
	assert.Equal(t, ledger.OutcomeTransportError, done["steady-000150"].Outcome)
	assert.Equal(t, ledger.CauseUnexplained, done["steady-000150"].Cause)
	assert.Equal(t, ledger.OutcomeConnectionLost, done["steady-000160"].Outcome)
	assert.Equal(t, ledger.CauseUnexplained, done["steady-000160"].Cause)
	assert.Equal(t, "", done["steady-000001"].Cause, "ok has no cause")
	for id := 20; id < 29; id++ { // the stall's 503s
		assert.Equal(t, ledger.CauseRefused, done[fmt.Sprintf("steady-%06d", id)].Cause, id)
	}
	assert.Equal(t, "fault:aborts", done["steady-000205"].Cause)

	counted := map[string]int{}
	for _, e := range done {
		if e.Cause != "" {
			counted[e.Cause]++
		}
	}
	assert.Equal(t, map[string]int{"fault:stall": 1, ledger.CauseRefused: 10, "fault:aborts": 20, ledger.CauseUnexplained: 2}, counted)

	res := reports.Compute(evs, judge.ReportConfig(sc))
	assert.Equal(t, counted, withoutEmpty(res.Causes))
	assert.Equal(t, reports.VerdictFail, res.Verdict, "two unexplained errors fail explained_errors")
	// Stripped of its causes (an older ledger), the same ledger gives the same counts.
	bare := make([]ledger.Event, len(evs))
	for i, e := range evs {
		e.Cause = ""
		bare[i] = e
	}
	again := reports.Compute(bare, judge.ReportConfig(sc))
	assert.Equal(t, withoutEmpty(res.Causes), withoutEmpty(again.Causes))
	assert.Equal(t, res.Verdict, again.Verdict)
}

func withoutEmpty(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if k != "" {
			out[k] = v
		}
	}
	return out
}
