package render

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/reports"
)

// dataPath is a drawn series: a line (stroke-width 1.2) or a stacked area (a fill that is
// not the white background or a fault band).
var dataPath = regexp.MustCompile(`<path d="M[^"]*L[^"]*" style="(?:fill:none;stroke:#[0-9A-F]+;stroke-width:1\.2|fill:#([0-9A-F]{6}))"`)

func drawsData(svg string) bool {
	for _, m := range dataPath.FindAllStringSubmatch(svg, -1) {
		if m[1] != "FFFFFF" {
			return true
		}
	}
	return false
}

// TestBrowserDOM checks the DOMs chromium built (make test-browser sets BROWSER_DOM for
// report.html, and BROWSER_COMPARE_DOM and BROWSER_TREND_DOM for compare.html and the
// trend page): every chart is there and draws data, and nothing is fetched.
func TestBrowserDOM(t *testing.T) {
	if os.Getenv("BROWSER_DOM") == "" {
		t.Skip("BROWSER_DOM not set: run make test-browser")
	}
	t.Run("report.html", func(t *testing.T) {
		dom := readDOM(t, "BROWSER_DOM")
		for _, id := range []string{"completed", "ttft", "itl", "e2e", "in_flight"} {
			svg := chartSVG(t, dom, id)
			assert.True(t, drawsData(svg), "chart %s is empty in the browser's DOM", id)
		}
		assert.Greater(t, strings.Count(dom, `<svg class="chart"`), 5, "the server gauges' charts are missing")
	})
	t.Run("compare.html", func(t *testing.T) {
		dom := readDOM(t, "BROWSER_COMPARE_DOM")
		for _, id := range []string{"cmp_completed", "cmp_ttft", "cmp_itl", "cmp_e2e"} {
			svg := chartSVG(t, dom, id)
			assert.True(t, drawsData(svg), "chart %s is empty in the browser's DOM", id)
			assert.NotContains(t, svg, ">no data<", "chart %s", id)
		}
	})
	t.Run("trend page", func(t *testing.T) {
		dom := readDOM(t, "BROWSER_TREND_DOM")
		ids := chartIDs.FindAllStringSubmatch(dom, -1)
		assert.GreaterOrEqual(t, len(ids), len(reports.KeyFigures)-2, "the trend page lacks its charts")
		for _, m := range ids {
			assert.True(t, drawsData(chartSVG(t, dom, m[1])), "trend chart %s is empty in the browser's DOM", m[1])
		}
	})
}

var chartIDs = regexp.MustCompile(`<svg class="chart" id="([^"]+)"`)

// readDOM reads the DOM file named by env, skipping when it is not set.
func readDOM(t *testing.T, env string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Skipf("%s not set: make test-browser renders that page only from its own runs", env)
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dom := string(data)
	assert.Empty(t, externalRefs(dom), "the page must load nothing from elsewhere")
	return dom
}

func TestDataPathDetector(t *testing.T) {
	for _, tc := range []struct {
		name, svg string
		want      bool
	}{
		{"line", `<path d="M1,2L3,4" style="fill:none;stroke:#2196F3;stroke-width:1.2" />`, true},
		{"stacked area", `<path d="M1,2L3,4Z" style="fill:#4CAF50" />`, true},
		{"orange stacked area", `<path d="M1,2L3,4Z" style="fill:#FF9800" />`, true},
		{"white background", `<path d="M0,0L737.01,0Z" style="fill:#FFFFFF" />`, false},
		{"axis tick", `<path d="M1,2L3,4" style="fill:none;stroke:#000000;stroke-width:0.5" />`, false},
		{"grid", `<path d="M1,2L3,4" style="fill:none;stroke:#808080;stroke-width:0.25" />`, false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, drawsData(tc.svg)) })
	}
}
