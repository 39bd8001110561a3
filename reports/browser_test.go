package reports

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestBrowserDOM checks the DOM chromium built from report.html (make test-browser sets
// BROWSER_DOM): every core chart is there and draws data, and nothing is fetched.
func TestBrowserDOM(t *testing.T) {
	path := os.Getenv("BROWSER_DOM")
	if path == "" {
		t.Skip("BROWSER_DOM not set: run make test-browser")
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dom := string(data)
	assert.Empty(t, externalRefs(dom))
	for _, id := range []string{"completed", "ttft", "itl", "e2e", "in_flight"} {
		svg := chartSVG(t, dom, id)
		assert.True(t, drawsData(svg), "chart %s is empty in the browser's DOM", id)
	}
	assert.Greater(t, strings.Count(dom, `<svg class="chart"`), 5, "the server gauges' charts are missing")
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
