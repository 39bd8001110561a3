package harness

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/phases"
	"pdsoak/ledger"
	"pdsoak/metricsel"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/server/api"
	"pdsoak/server/failpoint"
	"pdsoak/server/router"
)

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr
}

// A reference router whose workers are dead refuses every request with 503. Its /health
// says so (truthful_health passes); forced by the api/health failpoint to answer 200, it
// lies, and truthful_health fails with a health_lies finding naming the window.
func TestTruthfulHealth(t *testing.T) {
	for _, lie := range []bool{false, true} {
		name := map[bool]string{false: "truthful reference router", true: "health forced to lie"}[lie]
		t.Run(name, func(t *testing.T) {
			r, err := router.New([]router.Worker{{URL: deadURL(t), BootstrapAddr: "127.0.0.1:1"}}, []router.Worker{{URL: deadURL(t)}},
				router.WithHealthInterval(50*time.Millisecond), router.WithLogger(nil))
			require.NoError(t, err)
			r.Start()
			defer r.Close()
			srv := httptest.NewServer(api.New(r, api.WithRole("router")))
			defer srv.Close()
			if lie {
				require.NoError(t, failpoint.Enable(failpoint.APIHealth, "return(ok)"))
				defer func() { _ = failpoint.Disable(failpoint.APIHealth) }()
			}
			// Requests counted, not timed: 40 at 20/s; the run ends when they are done.
			sc := testScenario(srv.URL, time.Minute,
				scenarios.Workload{Name: "ol", Type: "open_loop", Count: 40, Pacer: &scenarios.Pacer{Type: "constant", Rate: 20}})
			sc.Target.MetricsURL = ""
			sc.Assertions = []string{reports.AssertTruthfulHealth}
			dir := t.TempDir()
			require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
			evs := readLedger(t, dir)
			outcomes := checkOneTerminal(t, evs)
			require.Equal(t, 40, outcomes[ledger.OutcomeRejected], "every request refused with 503: %v", outcomes)
			probes := eventsOf(evs, ledger.EventHealth)
			require.NotEmpty(t, probes, "the entry's /health was probed during the run")
			for _, p := range probes {
				assert.Equal(t, "target", p.Source)
				assert.Equal(t, srv.URL+"/health", p.URL)
				if lie {
					assert.Equal(t, 200, p.Status, "the failpoint makes /health lie")
				} else {
					assert.Equal(t, 503, p.Status, "the reference router's /health tells the truth")
				}
			}
			res := reports.Compute(evs, reports.Config{Assertions: sc.Assertions})
			require.Len(t, res.Assertions, 1)
			a := res.Assertions[0]
			if !lie {
				assert.Equal(t, reports.StatePass, a.State, a.Detail)
				assert.Empty(t, res.HealthLies)
				return
			}
			assert.Equal(t, reports.StateFail, a.State, a.Detail)
			require.NotEmpty(t, res.HealthLies)
			assert.Equal(t, "target", res.HealthLies[0].Source)
			assert.Contains(t, a.Detail, "HTTP 503")
		})
	}
}

// A labelled counter that has not been incremented yet (prometheus_client exposes its
// HELP and TYPE and no sample) is read as absent, which reports counts as 0 before the
// series first appears; an unreachable process is not.
func TestReadCounterAbsentSeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# HELP sglang:num_requests_total Number of requests processed.\n# TYPE sglang:num_requests_total counter\n")
	}))
	defer srv.Close()
	sel, err := metricsel.Parse("sglang:num_requests_total")
	require.NoError(t, err)
	c := scenarios.PDCounter{Process: "prefill", Selector: sel}
	r := &runner{opts: Options{ScrapeTimeout: time.Second}, hc: srv.Client()}
	_, err = r.readCounter(context.Background(), c, srv.URL)
	require.Error(t, err)
	assert.Equal(t, ledger.PDCounterAbsent, phases.PDCounterEvent(c, 0, err).Cause, err.Error())
	_, err = r.readCounter(context.Background(), c, deadURL(t))
	require.Error(t, err)
	assert.Empty(t, phases.PDCounterEvent(c, 0, err).Cause, err.Error())
}
