package gatecal

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/reports"
)

// TestCalibrationShort runs the calibration end to end on a handful of simulated pairs
// of a shortened calibration scenario (the full figures: make gate-calibration): the
// same-server pairs raise no alarm, the 25% slower ones are caught on TTFT and ITL,
// and the saved pairs re-judge to the same figures.
func TestCalibrationShort(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 6 runs")
	}
	short := strings.Replace(string(Scenario), "duration: 60s", "duration: 20s", 1)
	require.NotEqual(t, string(Scenario), short)
	rep, err := Run(context.Background(), Config{Pairs: 2, Slowdowns: []float64{0.25}, Scenario: []byte(short), Parallel: 2})
	require.NoError(t, err)
	require.Len(t, rep.Results, 4)
	assert.Equal(t, "sim", rep.Mode)
	for _, m := range []string{"ttft", "itl", "e2e"} {
		fa, n := rep.Rate(0, m, "", rep.Floors)
		assert.Equal(t, 2, n)
		assert.Zero(t, fa, "%s false alarms", m)
	}
	for _, m := range []string{"ttft", "itl"} {
		d, n := rep.Rate(0.25, m, "", rep.Floors)
		assert.Equal(t, 2, n)
		assert.Equal(t, 1.0, d, "%s detection of a 25%% slower server", m)
	}
	// Without floors at all, the sweep's first column, detection can only grow.
	d0, _ := rep.Rate(0.25, "", "", withRel(withRel(withRel(rep.Floors, "ttft", 0), "itl", 0), "e2e", 0))
	assert.Equal(t, 1.0, d0)
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	for _, want := range []string{"| any latency row | 0.0% (0/2) | 100.0% (2/2) |", "## p50 floor sweep", "## Tail floor sweep", "Smallest floors"} {
		assert.Contains(t, md.String(), want)
	}
	path := filepath.Join(t.TempDir(), "pairs.json")
	require.NoError(t, rep.Save(path))
	back, err := Load(path)
	require.NoError(t, err)
	var md2 bytes.Buffer
	require.NoError(t, back.WriteMarkdown(&md2))
	assert.Equal(t, md.String(), md2.String())
}

func TestMetricOf(t *testing.T) {
	for in, want := range map[string]string{"p90(itl)": "itl", "p50(ttft)": "ttft", "rate ok": "", "requests": "", "time to recover x (y)": ""} {
		assert.Equal(t, want, metricOf(in), in)
	}
}

func TestRateAndChoose(t *testing.T) {
	row := func(fig string, lo, base, new float64) reports.Row {
		return reports.Row{Group: "run", Figure: fig, Base: base, New: new, CI: &reports.Interval{Lo: lo, Hi: lo + 0.1}}
	}
	floors := reports.CompareOptions{}.EffectiveFloors()
	rep := &Report{Floors: floors, Slowdowns: []float64{0.1}, Results: []Pair{
		{Rows: []reports.Row{row("p50(ttft)", 0.02, 1, 1.02)}}, // a same-server pair with a 2% interval floor
		{Rows: []reports.Row{row("p50(ttft)", -0.01, 1, 1.0)}},
		{Slowdown: 0.1, Rows: []reports.Row{row("p50(ttft)", 0.06, 1, 1.1), row("p50(itl)", 0.09, 0.01, 0.0115)}},
	}}
	fa, n := rep.Rate(0, "ttft", "", withRel(floors, "ttft", 0.01))
	assert.Equal(t, 0.5, fa)
	assert.Equal(t, 2, n)
	rel, _ := rep.Choose()
	assert.Equal(t, 0.02, rel["ttft"], "the smallest swept floor with no false alarm: the interval must lie strictly above it")
	d, _ := rep.Rate(0.1, "itl", "", floors)
	assert.Equal(t, 1.0, d)
	d, _ = rep.Rate(0.1, "itl", "p90", floors)
	assert.Zero(t, d, "no p90 row")
}

// TestMetNeedsPairs: a goal with no pairs to measure it is not met (a saved file with no
// same-server pairs, or none at a slowdown, once printed "Goals met" on 0 of 0).
func TestMetNeedsPairs(t *testing.T) {
	floors := reports.CompareOptions{}.EffectiveFloors()
	ok, why := (&Report{Floors: floors}).Met()
	assert.False(t, ok)
	assert.Equal(t, []string{"false alarms not measured: no same-server pairs", "detection not measured: no slowdowns"}, why)
	ok, why = (&Report{Floors: floors, Slowdowns: []float64{0.1}, Results: []Pair{{}}}).Met()
	assert.False(t, ok)
	assert.Equal(t, []string{"TTFT detection 10% slower not measured: no pairs", "ITL detection 10% slower not measured: no pairs"}, why)
}
