package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

// A target that goes away as the run ends (here: it stops accepting connections, then
// answers the last request it holds) is dead at the end of the run. The load ends with
// that answer and the probing stops right after, before the periodic probe has failed
// twice or even once; the final tries must still find it dead, or the run passes with
// its target gone and no outage on record.
func TestTargetGoneAtTheEndFails(t *testing.T) {
	for _, keepAlive := range []bool{false, true} {
		// With keep-alive, the connections it already has outlive its listener: the
		// probe must not ride one of them (one the metrics or target-info GETs left
		// idle) and call a target that refuses every new connection alive.
		t.Run(map[bool]string{false: "connections closed", true: "idle connections kept"}[keepAlive], func(t *testing.T) {
			targetGoneAtTheEnd(t, keepAlive)
		})
	}
}

func targetGoneAtTheEnd(t *testing.T, keepAlive bool) {
	var srv *httptest.Server
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost { // /health, /v1/models
			w.WriteHeader(http.StatusOK)
			return
		}
		io.Copy(io.Discard, r.Body)
		srv.Listener.Close() // from now on every connection is refused
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	srv.Config.SetKeepAlivesEnabled(keepAlive)
	srv.Start()
	t.Cleanup(srv.Close)

	sc := testScenario(srv.URL, time.Minute, scenarios.Workload{Name: "b", Type: "burst", Count: 1})
	sc.Target.MetricsURL = ""
	generousDeadlines(sc)
	sc.Assertions = []string{reports.AssertNoSilentDrops, reports.AssertValidResponses}
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	require.Equal(t, map[ledger.Outcome]int{ledger.OutcomeOK: 1}, nonZeroOutcomes(outcomes))
	assert.NotEmpty(t, eventsOf(evs, ledger.EventTargetDown), "the dead target is not on record")
	assert.Empty(t, eventsOf(evs, ledger.EventTargetUp))

	r := verdictOf(t, sc, dir)
	assert.Equal(t, reports.VerdictFail, r.Verdict, "assertions %+v", r.Assertions)
	var alive reports.AssertionResult
	for _, a := range r.Assertions {
		if a.Name == reports.AssertTargetAlive {
			alive = a
		}
	}
	assert.Equal(t, reports.StateFail, alive.State, "assertions %+v", r.Assertions)
	assert.True(t, strings.Contains(alive.Detail, "did not come back"), "detail %q", alive.Detail)
}

func nonZeroOutcomes(m map[ledger.Outcome]int) map[ledger.Outcome]int {
	out := map[ledger.Outcome]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
