package reports_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
)

// TestContentionInconclusive: a contended run makes the answer inconclusive, naming the
// run and by how much, and never a regression, even for a twice slower server.
func TestContentionInconclusive(t *testing.T) {
	base, slow := reports.Synthetic(1000, 0, ledger.OutcomeRejected, 0.1, reports.VerdictPass), reports.Synthetic(1000, 0, ledger.OutcomeRejected, 0.2, reports.VerdictPass)
	c := reports.Compare(base, reports.Contended(slow, 0.8), "d", "d", reports.CompareOptions{})
	assert.True(t, c.Inconclusive())
	assert.False(t, c.Regressed())
	assert.NotEmpty(t, c.Regressions, "the would-be regressions are kept, not judged")
	assert.Contains(t, c.VerdictText(), "INCONCLUSIVE: NEW was contended: CPU pressure (mean share of time a task waited for a CPU) 80% (bound 40%)")
	assert.Contains(t, c.VerdictText(), "3 would-be regressions not judged")
	var md bytes.Buffer
	require.NoError(t, render.WriteCompareMarkdown(&md, c))
	assert.Contains(t, md.String(), "**Inconclusive:**")
	assert.Contains(t, md.String(), "## Would-be regressions (not judged")
	assert.Contains(t, md.String(), "- NEW contention: 10 windows: CPU pressure mean 80%")

	c = reports.Compare(reports.Contended(base, 0.3), slow, "d", "d", reports.CompareOptions{})
	assert.False(t, c.Inconclusive(), "under the bound")
	assert.True(t, c.Regressed())

	c = reports.Compare(reports.Contended(base, 0.3), slow, "d", "d", reports.CompareOptions{Contention: reports.ContentionBounds{CPUPressure: 0.2}})
	assert.True(t, c.Inconclusive())
	assert.Contains(t, c.VerdictText(), "BASE was contended: CPU pressure (mean share of time a task waited for a CPU) 30% (bound 20%)")

	lag := reports.Contended(base, 0)
	lag.Results.Contention.Metrics[ledger.ContentionTickLag] = reports.ContentionStat{P90: 0.2}
	c = reports.Compare(base, lag, "d", "d", reports.CompareOptions{})
	assert.Contains(t, c.VerdictText(), "harness tick lag p90 200ms (bound 50ms)")

	// The case make test-stress found: both runs under the pressure bound, yet every
	// wake-up waited for a CPU, and the same server's TTFT p50 grew 5.4%. The harness
	// threads' wait per wake-up names it.
	busy := reports.Contended(base, 0.08)
	busy.Results.Contention.Metrics[ledger.ContentionRunDelay] = reports.ContentionStat{Mean: 0.000129, Max: 0.000132}
	c = reports.Compare(base, busy, "d", "d", reports.CompareOptions{})
	assert.True(t, c.Inconclusive())
	assert.Contains(t, c.VerdictText(), "NEW was contended: harness threads' wait for a CPU (mean per wake-up) 129µs (bound 100µs)")
	assert.Contains(t, busy.Results.Contention.Summary(), "wait for a CPU per wake-up mean 129µs, max 132µs")
	busy.Results.Contention.Metrics[ledger.ContentionRunDelay] = reports.ContentionStat{Mean: 0.000033}
	assert.False(t, reports.Compare(base, busy, "d", "d", reports.CompareOptions{}).Inconclusive(), "a quiet machine's 33µs")
	c = reports.Compare(base, busy, "d", "d", reports.CompareOptions{Contention: reports.ContentionBounds{RunDelay: 0.00003}})
	assert.Contains(t, c.VerdictText(), "33µs (bound 30µs)")
}

// TestContentionFromLedger: contention samples in a ledger become Results.Contention.
func TestContentionFromLedger(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ledger.EventsFile)
	w, err := ledger.Create(path, nil)
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	w.Emit(ledger.Event{Time: t0, Type: ledger.EventRunStart, Scenario: "x", Seed: 1})
	for i, p := range []float64{0.1, 0.5, 0.9} {
		w.Emit(ledger.Event{Time: t0.Add(time.Duration(i+1) * 2 * time.Second), Type: ledger.EventSample, Source: ledger.ContentionSource,
			Metrics: map[string]float64{ledger.ContentionCPUPressure: p, ledger.ContentionTickLag: 0.001 * float64(i+1)}})
	}
	// Send lags, one in each window: the second window's harness was 300 ms late.
	for i, lag := range []float64{0.001, 0.3, 0.002} {
		at := t0.Add(time.Duration(2*i+1) * time.Second)
		w.Emit(ledger.Event{Time: at, Type: ledger.EventSent, RequestID: fmt.Sprint("r", i), Scheduled: &at, Lag: lag})
	}
	w.Emit(ledger.Event{Time: t0.Add(10 * time.Second), Type: ledger.EventRunEnd})
	require.NoError(t, w.Close())
	run, err := reports.ComputeRun(path, reports.Config{})
	require.NoError(t, err)
	c := run.Results.Contention
	require.NotNil(t, c)
	assert.Equal(t, 3, c.Windows)
	assert.InDelta(t, 0.5, c.Metrics[ledger.ContentionCPUPressure].Mean, 1e-9)
	assert.InDelta(t, 0.9, c.Metrics[ledger.ContentionCPUPressure].Max, 1e-9)
	assert.Equal(t, reports.ContentionStat{Mean: 0.101, P90: 0.3, Max: 0.3}, c.Metrics[reports.SendLagMetric], "each window's p99 send lag")
	assert.Equal(t, []string{"CPU pressure (mean share of time a task waited for a CPU) 50% (bound 40%)",
		"harness send lag (p90 of the windows' p99) 300ms (bound 100ms)"}, c.Exceeded(reports.ContentionBounds{}))
	assert.Contains(t, c.Summary(), "3 windows: CPU pressure mean 50%, max 90%")
	var page bytes.Buffer
	require.NoError(t, render.WriteHTML(&page, run.Results, run.Results.Timeline(), render.HTMLOptions{}))
	assert.Contains(t, page.String(), "Machine contention")
}

// TestCompareRunsPooled: a baseline of three nights is pooled (requests summed, sessions
// kept apart per run) and each latency row shows the nights' spread.
func TestCompareRunsPooled(t *testing.T) {
	nights := []*reports.Run{reports.SessionRun(1, 10, 20, true), reports.SessionRun(2, 10, 20, true), reports.SessionRun(3, 10, 20, true)}
	c, err := reports.CompareRuns(nights, reports.SessionRun(4, 10, 20, true), "d", reports.CompareOptions{})
	require.NoError(t, err)
	assert.Equal(t, 3, c.Bases)
	assert.Equal(t, 600, c.Base.Requests)
	var row reports.Row
	for _, r := range c.Rows {
		if r.Group == "run" && r.Figure == "p50(ttft)" {
			row = r
		}
	}
	require.NotNil(t, row.Spread)
	lo, hi := nights[0].Results.TTFT.P50, nights[0].Results.TTFT.P50
	for _, n := range nights {
		lo, hi = min(lo, n.Results.TTFT.P50), max(hi, n.Results.TTFT.P50)
	}
	assert.Equal(t, reports.Interval{Lo: lo, Hi: hi}, *row.Spread)
	pooled, err := reports.PoolRuns(nights)
	require.NoError(t, err)
	_, ends := reports.GroupBySession(pooled.Samples.TTFT, pooled.Samples.TTFTSessions)
	assert.Len(t, ends, 30, "10 sessions in each of 3 runs stay 30 groups")
	var md bytes.Buffer
	require.NoError(t, render.WriteCompareMarkdown(&md, c))
	assert.Contains(t, md.String(), "BASE pools 3 runs")
	assert.Contains(t, md.String(), "(runs ")
	_, err = reports.CompareRuns(nil, nights[0], "d", reports.CompareOptions{})
	assert.Error(t, err)
}

// TestCompareHTMLLinksRegressions: each regression row, and each regression in the list,
// links to the chart that draws its figure.
func TestCompareHTMLLinksRegressions(t *testing.T) {
	base, slow := reports.Synthetic(1000, 0, ledger.OutcomeRejected, 0.1, reports.VerdictPass), reports.Synthetic(1000, 0, ledger.OutcomeRejected, 0.2, reports.VerdictPass)
	c := reports.Compare(base, slow, "d", "d", reports.CompareOptions{})
	require.True(t, c.Regressed())
	var page bytes.Buffer
	require.NoError(t, render.WriteCompareHTML(&page, c, &reports.Timeline{}, &reports.Timeline{}))
	html := page.String()
	assert.Contains(t, html, `<td><a href="#cmp_ttft">p50(ttft)</a></td>`)
	assert.Contains(t, html, `<li><a href="#cmp_ttft">run p50(ttft): 0.104 s → 0.208 s`)
	assert.Contains(t, html, `id="cmp_ttft"`, "the anchor exists")
	assert.Contains(t, html, `<td>rate ok</td>`, "rows that did not regress are not links")

	page.Reset()
	require.NoError(t, render.WriteCompareHTML(&page, reports.Compare(base, reports.Contended(slow, 0.9), "d", "d", reports.CompareOptions{}), nil, nil))
	assert.Contains(t, page.String(), `<span class="warn">INCONCLUSIVE (a run was contended)</span>`)
	assert.Contains(t, page.String(), `Inconclusive: NEW was contended: CPU pressure`)
	assert.Contains(t, page.String(), "Would-be regressions (not judged)")
}

// TestInvalidRunRendered: compare.md and compare.html say an invalid run made the answer
// inconclusive, and do not blame the machine.
func TestInvalidRunRendered(t *testing.T) {
	base := reports.Synthetic(1000, 0, ledger.OutcomeRejected, 0.1, reports.VerdictPass)
	cut := reports.Synthetic(1000, 0, ledger.OutcomeRejected, 0.2, reports.VerdictInvalid)
	cut.Results.InvalidReasons = []string{"interrupted before the run completed: SIGTERM"}
	c := reports.Compare(base, cut, "d", "d", reports.CompareOptions{})
	var md, page bytes.Buffer
	require.NoError(t, render.WriteCompareMarkdown(&md, c))
	require.NoError(t, render.WriteCompareHTML(&page, c, nil, nil))
	assert.Contains(t, md.String(), "**Inconclusive:** NEW was invalid (interrupted before the run completed: SIGTERM). An invalid run is not whole")
	assert.Contains(t, md.String(), "## Would-be regressions (not judged: a run was invalid)")
	assert.Contains(t, page.String(), `<span class="warn">INCONCLUSIVE (a run was invalid)</span>`)
	assert.Contains(t, page.String(), `Inconclusive: NEW was invalid (interrupted before the run completed: SIGTERM). An invalid run is not whole`)
	assert.NotContains(t, md.String()+page.String(), "quiet machine")
}
