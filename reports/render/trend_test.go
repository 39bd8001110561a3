package render

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/reports"
)

// TestWriteTrend: one chart per key figure a scenario's runs have, each drawing data on a
// run-number axis, the failing nights marked and counted, links only where given.
func TestWriteTrend(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	var entries []reports.HistoryEntry
	for i, v := range []reports.Verdict{reports.VerdictPass, reports.VerdictFail, reports.VerdictPass, reports.VerdictFail} {
		entries = append(entries, reports.HistoryEntry{Scenario: "nightly", Digest: "d1", Label: "c" + string(rune('0'+i)), Time: t0.Add(time.Duration(i) * 24 * time.Hour),
			Verdict: v, Figures: map[string]float64{"ttft_p50": 0.1 + 0.01*float64(i), "ok_rate": 1 - 0.1*float64(i)}})
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTrend(&buf, entries, nil, func(e reports.HistoryEntry) string {
		if e.Label == "c2" {
			return "../runs/c2/report.html"
		}
		return ""
	}))
	page := buf.String()
	assert.Empty(t, externalRefs(page))
	ids := chartIDs.FindAllStringSubmatch(page, -1)
	require.Len(t, ids, 2, "one chart per figure the runs have")
	for _, m := range ids {
		svg := chartSVG(t, page, m[1])
		assert.True(t, drawsData(svg), "chart %s draws its runs", m[1])
		assert.Contains(t, svg, "not passing (2)", "chart %s marks the failing nights", m[1])
		assert.NotContains(t, svg, ">0</text>", "chart %s: the run axis starts at run 1, not 0", m[1])
		assert.Contains(t, svg, ">4</text>", "chart %s: run 4 has its tick", m[1])
	}
	assert.Contains(t, page, "4 runs, 2 not passing")
	assert.Equal(t, 1, strings.Count(page, `<a href="../runs/c2/report.html">`))
}

// TestTrendLabelsAndChanges: charts are captioned with human labels (not ttft_p50) and
// carry no title of their own; a change of backend or scenario digest between nights is
// marked on the charts and named in the table.
func TestTrendLabelsAndChanges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	id := func(backend, version string) *reports.Identity {
		return &reports.Identity{Mode: "real", Backend: backend, ServerVersion: version}
	}
	entries := []reports.HistoryEntry{
		{Scenario: "nightly", Digest: "d1", Time: t0, Verdict: reports.VerdictPass, Figures: map[string]float64{"ttft_p50": 0.1}, Identity: id("tinyref", "1.0")},
		{Scenario: "nightly", Digest: "d1", Time: t0.Add(24 * time.Hour), Verdict: reports.VerdictPass, Figures: map[string]float64{"ttft_p50": 0.1}, Identity: id("tinyref", "1.1")},
		{Scenario: "nightly", Digest: "d2", Time: t0.Add(48 * time.Hour), Verdict: reports.VerdictPass, Figures: map[string]float64{"ttft_p50": 0.2}, Identity: id("paced", "1.1")},
		{Scenario: "nightly", Digest: "d2", Time: t0.Add(72 * time.Hour), Verdict: reports.VerdictPass, Figures: map[string]float64{"ttft_p50": 0.2}},
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTrend(&buf, entries, nil, func(reports.HistoryEntry) string { return "" }))
	page := buf.String()
	assert.Contains(t, page, "<figcaption>TTFT p50 (seconds)</figcaption>")
	assert.NotContains(t, page, ">ttft_p50<", "no raw figure names")
	assert.Contains(t, page, `<td>server version &#34;1.0&#34; → &#34;1.1&#34;</td>`)
	assert.Contains(t, page, `<td>scenario digest d1 → d2; backend &#34;tinyref&#34; → &#34;paced&#34;</td>`)
	assert.Contains(t, page, "<td></td>", "a line without an identity compares its digest only")
	svg := chartSVG(t, page, "trend_nightly_ttft_p50")
	assert.Contains(t, svg, "changed: server version", "the change is marked on the chart")
	assert.Contains(t, page, "dashed lines mark where")
	assert.Equal(t, "Silent drops", FigureLabel("silent_drops"))
	assert.Equal(t, "new figure", FigureLabel("new_figure"))
}

// TestTrendIgnoresPortOnlyLaunchChanges: nightly --reference takes free ports each
// night, so launches that differ only in their ports mark no change; another flag does.
func TestTrendIgnoresPortOnlyLaunchChanges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	entry := func(day int, launch string) reports.HistoryEntry {
		return reports.HistoryEntry{Scenario: "nightly", Digest: "d1", Time: t0.Add(time.Duration(day) * 24 * time.Hour),
			Verdict: reports.VerdictPass, Figures: map[string]float64{"ttft_p50": 0.1},
			Identity: &reports.Identity{Mode: "real", Backend: "launched", Launch: launch}}
	}
	entries := []reports.HistoryEntry{
		entry(0, "decode: pdserver --port=34521 --prefill http://127.0.0.1:40055"),
		entry(1, "decode: pdserver --port=39025 --prefill http://127.0.0.1:32999"),
		entry(2, "decode: pdserver --port=39025 --prefill http://127.0.0.1:32999 --tp 2"),
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTrend(&buf, entries, nil, func(reports.HistoryEntry) string { return "" }))
	page := buf.String()
	assert.Equal(t, 1, strings.Count(page, "<td>target.launch "), "one launch change, the flag's:\n%s", page)
	assert.Contains(t, page, "--tp 2&#34;</td>")
}
