package reports_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/reports"
	"pdsoak/reports/internal/fixture"
	"pdsoak/reports/render"
)

func TestCompareGoldenRunWithItself(t *testing.T) {
	run := reports.GoldenRun(t)
	c := reports.Compare(run, run, "d", "d", reports.CompareOptions{})
	assert.False(t, c.Regressed(), "%q", c.Regressions)
	var md, page bytes.Buffer
	require.NoError(t, render.WriteCompareMarkdown(&md, c))
	require.NoError(t, render.WriteCompareHTML(&page, c, run.Results.Timeline(), run.Results.Timeline()))
	assert.NotContains(t, md.String(), "## Workload", "one workload: its rows would repeat the run's")
	assert.Contains(t, md.String(), "| time to recover stall-kv | 0 s | 0 s | = |")
	html := page.String()
	assert.Equal(t, 4, strings.Count(html, "<svg"), "completed, TTFT, ITL, e2e")
	for _, bad := range []string{`src="http`, `href="http`, "@import", "<script"} {
		assert.NotContains(t, html, bad)
	}
}

// TestGoldenCompareCharts: the figures behind compare.html's overlaid charts (not the
// pixels), for the fixture run as BASE against a run with GPU samples and an unrecovered
// fault as NEW.
func TestGoldenCompareCharts(t *testing.T) {
	base := reports.GoldenRun(t).Results.Timeline()
	new := reports.Compute(fixture.GPULedger(), reports.Config{}).Timeline()
	charts := render.CompareCharts(base, new)
	type figures struct {
		ID, Title string
		XMax      float64
		Series    []reports.Series
		Spans     []reports.Span
		VLines    []render.VLine
		Marks     []float64
	}
	var got []figures
	for _, c := range charts {
		got = append(got, figures{c.ID, c.Title, c.XMax, c.Series, c.Spans, c.VLines, c.Marks})
	}
	data, err := json.MarshalIndent(got, "", " ")
	require.NoError(t, err)
	reports.Golden(t, "compare_charts.golden.json", append(reports.PointPairs.ReplaceAll(data, []byte("[$1, $2]")), '\n'))

	require.Len(t, charts, 4, "completed, TTFT, ITL, e2e")
	assert.Zero(t, charts[1].Gap, "lines, not dots: no gap breaks")
	thr := charts[0]
	require.Equal(t, "BASE all", thr.Series[0].Name)
	total := 0.0
	for _, p := range thr.Series[0].Points {
		total += p.Y * base.Window
	}
	assert.InDelta(t, float64(reports.GoldenRun(t).Results.Requests), total, 1e-6, "BASE's total line counts every request once")
	var labels []string
	for _, sp := range thr.Spans {
		labels = append(labels, sp.Label)
	}
	assert.Contains(t, labels, "BASE stall-kv (kv_transfer_stall)")
	assert.Equal(t, len(base.Faults)+len(new.Faults), len(thr.Spans), "both runs' fault windows")
	assert.Equal(t, []string{"BASE p50", "BASE p99", "NEW p50", "NEW p99"}, reports.SeriesNames(charts[1].Series))

	same := render.CompareCharts(base, base)[0].Spans
	require.Len(t, same, len(base.Faults), "a fault at the same time in both runs is one band")
	assert.Equal(t, "stall-kv (kv_transfer_stall), both runs", same[0].Label)
}
