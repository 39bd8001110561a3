package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteTrend: one chart per key figure a scenario's runs have, each drawing data on a
// run-number axis, the failing nights marked and counted, links only where given.
func TestWriteTrend(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	var entries []HistoryEntry
	for i, v := range []Verdict{VerdictPass, VerdictFail, VerdictPass, VerdictFail} {
		entries = append(entries, HistoryEntry{Scenario: "nightly", Digest: "d1", Label: "c" + string(rune('0'+i)), Time: t0.Add(time.Duration(i) * 24 * time.Hour),
			Verdict: v, Figures: map[string]float64{"ttft_p50": 0.1 + 0.01*float64(i), "ok_rate": 1 - 0.1*float64(i)}})
	}
	var buf bytes.Buffer
	require.NoError(t, WriteTrend(&buf, entries, nil, func(e HistoryEntry) string {
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
