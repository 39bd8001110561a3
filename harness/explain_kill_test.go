package harness

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
)

// A single-process server (vLLM-style, no router in front) SIGKILLed by a declared
// process_kill cuts the streams it serves. They end connection_lost (not truncated:
// the server did not end them cleanly), every error of the outage is attributed to the
// kill, the liveness probe sees the outage inside the fault, and the run passes.
//
// It needs the HTTP client's split of EOF mid-response into connection_lost (issue 19,
// harness/client): on a branch without it the cut streams are truncated and
// valid_responses fails this test.
func TestDeclaredKillOfSingleProcessTargetPasses(t *testing.T) {
	bin := pdserverBinary(t)
	port := freePort(t)
	sc := parseScenario(t, fmt.Sprintf(`
name: kill-single
duration: 14s
target:
  url: http://127.0.0.1:%[1]d
  metrics_url: http://127.0.0.1:%[1]d/metrics
  launch:
    - name: server
      role: colocated
      command: [%[2]q, colocated, --port, "%[1]d", --backend, simtime]
      health_url: http://127.0.0.1:%[1]d/health
      start_timeout: 60s
workloads:
  - {name: agents, type: agents, agents: 4, turns: 0, max_tokens: 256, think_time: 50ms}
faults:
  - {name: kill, type: process_kill, target: server, at: 4s, for: 2s}
deadlines: {connect: 10s, first_token: 30s, stall: 30s, total: 1m}
drain: {timeout: 1m, leak_timeout: 30s}
self_check: {max_lag: 30s}
assertions: [no_silent_drops, valid_responses, explained_errors]
`, port, bin))
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	r := verdictOf(t, sc, dir)
	assert.Equal(t, reports.VerdictPass, r.Verdict, "outcomes %v, causes %v, assertions %+v", outcomes, r.Causes, r.Assertions)
	assert.NotZero(t, outcomes[ledger.OutcomeConnectionLost], "the kill cut no stream: outcomes %v", outcomes)
	assert.Zero(t, outcomes[ledger.OutcomeTruncated], "outcomes %v", outcomes)
	assert.Zero(t, r.Causes[ledger.CauseUnexplained], "causes %v", r.Causes)
	assert.Positive(t, r.Causes["fault:kill"], "causes %v", r.Causes)
	require.NotEmpty(t, r.Liveness, "the probe never saw the server down")
	for _, l := range r.Liveness {
		assert.Equal(t, "kill", l.Fault, "outage %+v", l)
		assert.NotNil(t, l.Up, "outage %+v never ended", l)
	}
}
