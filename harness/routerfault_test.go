package harness

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// A scenario fault enables the api/health failpoint on the embedded reference topology's
// router: the launcher starts the router with --enable-fault-injection and the token in
// its environment, as the workers, so its admin API takes the fault and the harness's
// own health probes hit it (fault verified by hit counts read back from the router).
func TestScenarioFaultMakesEmbeddedRouterHealthLie(t *testing.T) {
	bin := pdserverBinary(t)
	sc := parseScenario(t, `
name: router-health-lie
seed: 4
duration: 6s
reference: {prefill: 1, decode: 1, backend: simtime}
workloads:
  - {name: ol, type: open_loop, pacer: {type: constant, rate: 5}, max_tokens: 4}
faults:
  - {name: lie, type: failpoint, target: router, at: 1s, for: 3s, params: {name: api/health, terms: "return(ok)"}}
deadlines: {connect: 10s, first_token: 30s, stall: 30s, total: 1m}
drain: {timeout: 1m, leak_timeout: 30s}
self_check: {max_lag: 30s}
assertions: [no_silent_drops]
`)
	require.True(t, sc.Reference.FaultInjection, "a failpoint fault turns the admin API on")
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, PDServerCommand: []string{bin}}))
	evs := readLedger(t, dir)
	checkOneTerminal(t, evs)
	var verified []ledger.Event
	for _, ev := range eventsOf(evs, ledger.EventFaultVerified) {
		if ev.Fault == "lie" {
			verified = append(verified, ev)
		}
	}
	require.NotEmpty(t, verified, "the fault on the router was never verified")
	v := verified[len(verified)-1]
	require.NotNil(t, v.Passed)
	assert.True(t, *v.Passed, "fault not verified: %s %s", v.Detail, v.Error)
	assert.Contains(t, v.Detail, "failpoint api/health=return(ok) hit")
	assert.Contains(t, v.Detail, "router:", "hit on the router")
}
