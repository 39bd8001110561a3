package render

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/internal/fixture"
)

// goldenConfig is how reports' golden ledger (../testdata/events.jsonl) is judged.
var goldenConfig = reports.Config{Assertions: fixture.GoldenAssertions,
	Recovery: reports.RecoveryConfig{Window: 3 * time.Second, Within: 10 * time.Second, Threshold: 0.6}}

// externalRef matches what in a page would be fetched from elsewhere.
var externalRef = regexp.MustCompile(`(?i)(?:src|href|xlink:href|action|poster)\s*=\s*["']?\s*(?:https?:)?//|@import|url\(\s*["']?\s*(?:https?:)?//|<script[^>]+src|<link[^>]+href`)

// externalRefs lists what in a page would be fetched from elsewhere.
func externalRefs(page string) []string { return externalRef.FindAllString(page, -1) }

func TestExternalRefsDetector(t *testing.T) {
	for _, tc := range []struct {
		name, page string
		bad        bool
	}{
		{"cdn script", `<script src="https://cdn.example/plotly.js"></script>`, true},
		{"protocol-relative image", `<img src='//example.com/a.png'>`, true},
		{"stylesheet link", `<link rel="stylesheet" href="style.css">`, true},
		{"css import", `<style>@import "x.css";</style>`, true},
		{"css font url", `<style>@font-face{src:url(https://fonts.example/a.woff)}</style>`, true},
		{"svg namespace is not a fetch", `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">`, false},
		{"plain text link is not a fetch", `<td>http://127.0.0.1:30000</td>`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.bad, len(externalRefs(tc.page)) > 0)
		})
	}
}

func TestReportHTML(t *testing.T) {
	for _, tc := range []struct {
		name     string
		events   func(*testing.T) []ledger.Event
		cfg      reports.Config
		charts   []string
		contains []string
	}{
		{"fixture", func(t *testing.T) []ledger.Event { return fixture.ReadEvents(t, "../testdata/events.jsonl") }, goldenConfig,
			[]string{"completed", "ttft", "itl", "e2e", "in_flight", "gauge_sglang_num_running_reqs", "gauge_sglang_num_queue_reqs"},
			[]string{`id="assertions"`, `class="s-fail"`, "r009", "decode_prealloc_queue", "stall-kv", "harness self-check", "<details"}},
		{"gpu", func(*testing.T) []ledger.Event { return fixture.GPULedger() }, reports.Config{Assertions: []string{reports.AssertNoSilentDrops, reports.AssertNoLeaks}},
			[]string{"completed", "ttft", "itl", "e2e", "in_flight", "gauge_sglang_num_running_reqs", "gpu_util", "gpu_mem"},
			[]string{"kill-decode (process_kill)", "recovered: kill-decode", "g4", "GPUs", `class="s-not_evaluated">not evaluated`, "Why this run is invalid"}},
		{"empty ledger", func(*testing.T) []ledger.Event { return nil }, reports.Config{},
			[]string{"completed", "ttft", "itl", "e2e", "in_flight"}, []string{"no request reached a terminal outcome"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := reports.Compute(tc.events(t), tc.cfg)
			var buf bytes.Buffer
			require.NoError(t, WriteHTML(&buf, res, res.Timeline(), HTMLOptions{Scenario: []byte(`{"name": "x<y"}`)}))
			page := buf.String()
			assert.Empty(t, externalRefs(page), "report.html must load nothing from elsewhere")
			for _, id := range tc.charts {
				svg := chartSVG(t, page, id)
				assert.Equal(t, tc.name != "empty ledger", drawsData(svg), "chart %s: drawn data", id)
			}
			for _, s := range tc.contains {
				assert.True(t, strings.Contains(page, s), "report.html lacks %q", s)
			}
			assert.True(t, strings.Contains(page, "x&lt;y"), "the scenario is escaped")
		})
	}
}

// chartSVG returns the inline SVG with the given id.
func chartSVG(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `<svg class="chart" id="`+id+`"`)
	require.GreaterOrEqual(t, i, 0, "no chart %s", id)
	j := strings.Index(page[i:], "</svg>")
	require.Greater(t, j, 0)
	return page[i : i+j]
}

func TestWriteAllWritesReportHTML(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, reports.ScenarioFile), []byte(`{"name": "golden", "seed": 42}`), 0o644))
	res, err := reports.ComputeFile("../testdata/events.jsonl", goldenConfig)
	require.NoError(t, err)
	require.NoError(t, WriteAll(dir, res))
	page, err := os.ReadFile(filepath.Join(dir, reports.HTMLFile))
	require.NoError(t, err)
	for _, s := range []string{`id="scenario"`, `&#34;seed&#34;: 42`, `id="completed"`} {
		assert.True(t, strings.Contains(string(page), s), "report.html lacks %q", s)
	}
}

// TestRenderSVGNoData: a chart with nothing to draw says so instead of showing empty axes.
func TestRenderSVGNoData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		series []reports.Series
		empty  bool
	}{
		{"no series", nil, true},
		{"series without points", []reports.Series{{Name: "p50"}}, true},
		{"one point", []reports.Series{{Name: "p50", Points: []reports.Point{{X: 1, Y: 2}}}}, false},
		{"a line", []reports.Series{{Name: "p50", Points: []reports.Point{{X: 1, Y: 2}, {X: 2, Y: 3}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svg, err := RenderSVG(Chart{ID: "x", Title: "t", Series: tc.series, Spans: []reports.Span{{From: 1, To: 2, Label: "f"}}}, ChartWidth, ChartHeight)
			require.NoError(t, err)
			assert.Equal(t, tc.empty, strings.Contains(string(svg), ">no data<"), "the no-data note")
		})
	}
}

// TestForensicsLinks: a forensics bundle's note event becomes real links in report.html
// (its MANIFEST.json and its directory), never raw markdown, and summary.md keeps the link.
func TestForensicsLinks(t *testing.T) {
	note := "forensics bundle (wedge: no progress for 10s): [forensics/wedge-120000](forensics/wedge-120000/MANIFEST.json), 7 files collected, 1 collectors failed"
	evs := []ledger.Event{
		fixture.Ev(ledger.EventRunStart, 0, nil),
		fixture.Ev(ledger.EventNote, 0, func(e *ledger.Event) { e.Message = "a plain note with [a link](x.md)" }),
		fixture.Done("a", 1, ledger.OutcomeOK),
		fixture.Ev(ledger.EventNote, 2, func(e *ledger.Event) { e.Source, e.Detail, e.Message = "forensics", "forensics/wedge-120000", note }),
	}
	res := reports.Compute(evs, reports.Config{})
	require.Equal(t, []reports.ForensicsBundle{{Dir: "forensics/wedge-120000", Note: note}}, res.Forensics)

	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, res, res.Timeline(), HTMLOptions{}))
	html := page.String()
	for _, want := range []string{
		`<a href="forensics/wedge-120000/MANIFEST.json">MANIFEST.json</a>`,
		`<a href="forensics/wedge-120000/">forensics/wedge-120000/</a>`,
		"<td>wedge: no progress for 10s — 7 files collected, 1 collectors failed</td>",
		"<li>a plain note with a link</li>",
	} {
		assert.Contains(t, html, want)
	}
	assert.NotContains(t, html, "](", "no raw markdown link in report.html")
	assert.Equal(t, 1, strings.Count(html, "7 files collected"), "the bundle is shown once, in Forensics, not again in Notes")

	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, res))
	assert.Contains(t, md.String(), "[forensics/wedge-120000](forensics/wedge-120000/MANIFEST.json)")
}

// TestSimulatedRunSaysSo: a run_start with mode sim makes report.html and summary.md say
// the run was simulated; a real run's do not.
func TestSimulatedRunSaysSo(t *testing.T) {
	for _, mode := range []string{ledger.ModeSim, ""} {
		t.Run("mode="+mode, func(t *testing.T) {
			events := fixture.ReadEvents(t, "../testdata/events.jsonl")
			for i := range events {
				if events[i].Type == ledger.EventRunStart {
					events[i].Mode = mode
				}
			}
			res := reports.Compute(events, goldenConfig)
			require.Equal(t, mode, res.Mode)
			var page, md bytes.Buffer
			require.NoError(t, WriteHTML(&page, res, res.Timeline(), HTMLOptions{}))
			require.NoError(t, WriteMarkdown(&md, res))
			sim := mode == ledger.ModeSim
			assert.Equal(t, sim, strings.Contains(page.String(), `<b id="mode">simulated</b>`), "report.html header")
			assert.Equal(t, sim, strings.Contains(md.String(), "- mode: **simulated**"), "summary.md")
		})
	}
}
