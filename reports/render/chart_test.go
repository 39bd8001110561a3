package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/stretchr/testify/assert"

	"pdsoak/reports"
)

func TestMarkPointsKeepsEveryColumn(t *testing.T) {
	xs := []float64{0.001, 0.002, 5, 5.0001, 99.99}
	got := markPoints(xs, 100, 1)
	assert.Equal(t, []reports.Point{{X: 0.001, Y: 1}, {X: 5, Y: 1}, {X: 99.99, Y: 1}}, got, "drops in one pixel column share a glyph; none is lost")
}

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{26, 30}, {1, 1}, {0.013, 0.015}, {1.3, 1.5}, {0, 1}, {7.2, 8}, {81, 100}} {
		assert.InDelta(t, tc.want, niceCeil(tc.in), 1e-12, "niceCeil(%g)", tc.in)
	}
}

func TestRoundTicker(t *testing.T) {
	labels := func(min, max float64) []string {
		var out []string
		for _, tk := range (roundTicker{}).Ticks(min, max) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		min, max float64
		want     []string
	}{
		{"seconds", 0, 50, []string{"0", "10", "20", "30", "40", "50"}},
		{"small latencies", 0, 0.1, []string{"0", "0.02", "0.04", "0.06", "0.08", "0.1"}},
		{"long soak", 0, 15000, []string{"0", "5000", "10000", "15000"}},
		{"empty range", 1, 1, []string{"1"}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, labels(tc.min, tc.max)) })
	}
}

func TestLongTitlesWrapInsideTheChart(t *testing.T) {
	p := plot.New()
	sty := p.Title.TextStyle
	sty.Font.Variant = "Sans"
	sty.Font.Size = vg.Points(12)
	max := titleWidth(ChartWidth / 2)
	long := "Server gauge sglang:num_decode_prealloc_queue_reqs by process (one line per worker)"
	require.Greater(t, sty.Width(long), max, "the case must need wrapping")
	got := wrapTitle(sty, long, max)
	lines := strings.Split(got, "\n")
	require.Greater(t, len(lines), 1)
	for _, l := range lines {
		require.LessOrEqual(t, sty.Width(l), max, "line %q", l)
	}
	require.Equal(t, strings.Fields(long), strings.Fields(strings.ReplaceAll(got, "\n", " ")), "no word lost")
	require.Equal(t, "short", wrapTitle(sty, "short", max))

	svg, err := RenderSVG(Chart{Title: long, Series: []reports.Series{{Name: "a", Points: []reports.Point{{X: 0, Y: 1}, {X: 1, Y: 2}}}}}, ChartWidth/2, ChartHeight)
	require.NoError(t, err)
	require.Contains(t, string(svg), ">"+lines[len(lines)-1]+"<", "the title's last line is drawn")
}
