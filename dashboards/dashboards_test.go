package dashboards

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/telemetry"
)

var (
	seriesRe  = regexp.MustCompile(`\bpdsoak_[a-zA-Z0-9_]+`)
	matcherRe = regexp.MustCompile(`\{([^}]*)\}`)
	labelRe   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	byRe      = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	legendRe  = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
)

// TestEveryQueryNamesAnExportedSeries: the dashboard parses, and every query, filter,
// grouping and legend uses only series and labels the harness exports.
func TestEveryQueryNamesAnExportedSeries(t *testing.T) {
	var generic map[string]any
	require.NoError(t, json.Unmarshal(PDSoak, &generic), "pdsoak.json is JSON")
	for _, k := range []string{"uid", "title", "panels", "templating", "annotations", "schemaVersion"} {
		assert.Contains(t, generic, k)
	}
	qs, err := Queries(PDSoak)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(qs), 15)
	series, labels := telemetry.Series(), telemetry.LabelNames()
	used := map[string]bool{}
	for _, q := range qs {
		names := seriesRe.FindAllString(q.Expr, -1)
		assert.NotEmpty(t, names, "%s: %q names no pdsoak_ series", q.Where, q.Expr)
		for _, n := range names {
			used[n] = true
			assert.Contains(t, series, n, "%s: %s is not a series the harness exports", q.Where, n)
		}
		var ls []string
		for _, m := range matcherRe.FindAllStringSubmatch(q.Expr, -1) {
			for _, l := range labelRe.FindAllStringSubmatch(m[1], -1) {
				ls = append(ls, l[1])
			}
		}
		for _, m := range byRe.FindAllStringSubmatch(q.Expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				ls = append(ls, strings.TrimSpace(l))
			}
		}
		for _, m := range legendRe.FindAllStringSubmatch(q.Legend, -1) {
			ls = append(ls, m[1])
		}
		for _, l := range ls {
			assert.Contains(t, labels, l, "%s: label %q is not one the harness exports", q.Where, l)
		}
		assert.Equal(t, strings.Count(q.Expr, "("), strings.Count(q.Expr, ")"), "%s: unbalanced parentheses", q.Where)
	}
	// The panels: outcomes by cause, in flight, latency percentiles, fault
	// windows, harness lag.
	for _, s := range []string{telemetry.SeriesRequests, telemetry.SeriesInFlight, telemetry.SeriesTTFT + "_bucket",
		telemetry.SeriesITL + "_bucket", telemetry.SeriesE2E + "_bucket", telemetry.SeriesSilentDrops,
		telemetry.SeriesFaultActive, telemetry.SeriesHarnessLag + "_bucket"} {
		assert.True(t, used[s], "no panel shows %s", s)
	}
	assert.True(t, slices.ContainsFunc(qs, func(q Query) bool {
		return strings.HasPrefix(q.Where, "annotation") && strings.Contains(q.Expr, telemetry.SeriesFaultActive)
	}), "fault windows are annotations")
}

func TestQueriesRefusesBadJSON(t *testing.T) {
	_, err := Queries([]byte(`{"panels": [`))
	require.ErrorContains(t, err, "dashboards:")
}

// TestTheCheckCatchesAnUnknownSeries makes sure the regexps see what they must: a typo
// in a series name is found.
func TestTheCheckCatchesAnUnknownSeries(t *testing.T) {
	qs, err := Queries([]byte(`{"panels":[{"title":"x","targets":[{"refId":"A","expr":"sum by (workload) (rate(pdsoak_request_total{cause=\"x\"}[1m]))"}]}]}`))
	require.NoError(t, err)
	require.Len(t, qs, 1)
	assert.Equal(t, []string{"pdsoak_request_total"}, seriesRe.FindAllString(qs[0].Expr, -1))
	assert.NotContains(t, telemetry.Series(), "pdsoak_request_total")
	assert.Equal(t, "cause", labelRe.FindStringSubmatch(matcherRe.FindStringSubmatch(qs[0].Expr)[1])[1])
	assert.Equal(t, "workload", byRe.FindStringSubmatch(qs[0].Expr)[1])
}
