package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"pdsoak/ledger"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// gpuLedger is a short run with GPU samples, two processes' gauges, a fault that never
// recovers and a silent drop scheduled inside it.
func gpuLedger() []ledger.Event {
	u := func(v float64) *float64 { return &v }
	m := func(v uint64) *uint64 { return &v }
	evs := []ledger.Event{{Time: at(0), Type: ledger.EventRunStart, Scenario: "gpu", Seed: 7}}
	for i := range 8 {
		s := at(float64(i) + 0.5)
		id := fmt.Sprintf("g%d", i)
		evs = append(evs, ledger.Event{Time: s, Type: ledger.EventScheduled, RequestID: id})
		o, e2e := ledger.OutcomeOK, 0.4
		if i == 4 {
			o, e2e = ledger.OutcomeStalled, 3
		}
		evs = append(evs, ledger.Event{Time: s.Add(time.Duration(e2e * float64(time.Second))), Type: ledger.EventDone, RequestID: id,
			Scheduled: &s, Outcome: o, TTFT: 0.1 * float64(i+1), E2E: e2e, ITL: []float64{0.01, 0.02}, Phase: map[bool]ledger.Phase{true: ledger.PhaseMidStream}[o != ledger.OutcomeOK]})
		for _, src := range []string{"decode-0", "prefill-0"} {
			evs = append(evs, ledger.Event{Time: at(float64(i) + 0.9), Type: ledger.EventSample, Source: src,
				Metrics: map[string]float64{"sglang:num_running_reqs": float64(i % 3)}})
		}
		evs = append(evs, ledger.Event{Time: at(float64(i) + 0.95), Type: ledger.EventSample, Source: ledger.GPUSource, InFlight: 1,
			GPUs: []ledger.GPU{{Index: 0, Util: u(float64(10 * i)), MemUsed: m(uint64(i) << 30), MemTotal: m(8 << 30)}}})
	}
	evs = append(evs,
		ledger.Event{Time: at(3), Type: ledger.EventFaultStart, Fault: "kill-decode", FaultType: "process_kill", Target: "decode-0"},
		ledger.Event{Time: at(4), Type: ledger.EventFaultStop, Fault: "kill-decode"},
		ledger.Event{Time: at(12), Type: ledger.EventRunEnd})
	return evs
}

// longLedger spans 1,500 s so the bins widen to 5 s.
func longLedger() []ledger.Event {
	evs := []ledger.Event{{Time: at(0), Type: ledger.EventRunStart, Scenario: "long"}}
	for i := range 30 {
		s := at(float64(i * 50))
		id := fmt.Sprintf("l%d", i)
		evs = append(evs, ledger.Event{Time: s, Type: ledger.EventScheduled, RequestID: id},
			ledger.Event{Time: s.Add(time.Second), Type: ledger.EventDone, RequestID: id, Scheduled: &s, Outcome: ledger.OutcomeOK, TTFT: 0.2, E2E: 1})
	}
	return append(evs, ledger.Event{Time: at(1500), Type: ledger.EventRunEnd})
}

func readEvents(t *testing.T, path string) []ledger.Event {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var evs []ledger.Event
	_, err = ledger.Read(f, func(e ledger.Event) error { evs = append(evs, e); return nil })
	require.NoError(t, err)
	return evs
}

// TestTimelineGolden pins the figures behind every chart (not the pixels).
func TestTimelineGolden(t *testing.T) {
	for _, tc := range []struct {
		name, golden string
		events       func(*testing.T) []ledger.Event
		cfg          Config
	}{
		{"fixture ledger with a fault, drops and gauges", "timeline.golden.json", func(t *testing.T) []ledger.Event { return readEvents(t, "testdata/events.jsonl") }, goldenConfig},
		{"GPU samples and an unrecovered fault", "timeline_gpu.golden.json", func(*testing.T) []ledger.Event { return gpuLedger() }, Config{}},
		{"a long run widens the bins", "timeline_long.golden.json", func(*testing.T) []ledger.Event { return longLedger() }, Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(tc.events(t), tc.cfg)
			tl := res.Timeline()
			require.NotNil(t, tl)
			got, err := json.MarshalIndent(tl, "", " ")
			require.NoError(t, err)
			golden(t, tc.golden, append(pointPairs.ReplaceAll(got, []byte("[$1, $2]")), '\n'))
			assert.Len(t, tl.Drops, res.SilentDrops, "every silent drop is marked")
			assert.Len(t, tl.Faults, len(res.Faults), "every fault is shaded")
			assert.LessOrEqual(t, len(tl.InFlight.Points), MaxWindows+1)
		})
	}
}

var (
	// pointPairs keeps each [x, y] of a golden timeline on one line.
	pointPairs  = regexp.MustCompile(`\[\n\s+([^\s,\[\]{}]+),\n\s+([^\s,\[\]{}]+)\n\s+\]`)
	externalRef = regexp.MustCompile(`(?i)(?:src|href|xlink:href|action|poster)\s*=\s*["']?\s*(?:https?:)?//|@import|url\(\s*["']?\s*(?:https?:)?//|<script[^>]+src|<link[^>]+href`)
)

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
		cfg      Config
		charts   []string
		contains []string
	}{
		{"fixture", func(t *testing.T) []ledger.Event { return readEvents(t, "testdata/events.jsonl") }, goldenConfig,
			[]string{"completed", "ttft", "itl", "e2e", "in_flight", "gauge_sglang_num_running_reqs", "gauge_sglang_num_queue_reqs"},
			[]string{`id="assertions"`, `class="s-fail"`, "r009", "decode_prealloc_queue", "stall-kv", "harness self-check", "<details"}},
		{"gpu", func(*testing.T) []ledger.Event { return gpuLedger() }, Config{Assertions: []string{AssertNoSilentDrops, AssertNoLeaks}},
			[]string{"completed", "ttft", "itl", "e2e", "in_flight", "gauge_sglang_num_running_reqs", "gpu_util", "gpu_mem"},
			[]string{"kill-decode (process_kill)", "recovered: kill-decode", "g4", "GPUs", `class="s-not_evaluated">not evaluated`, "Why this run is invalid"}},
		{"empty ledger", func(*testing.T) []ledger.Event { return nil }, Config{},
			[]string{"completed", "ttft", "itl", "e2e", "in_flight"}, []string{"no request reached a terminal outcome"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(tc.events(t), tc.cfg)
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
	require.NoError(t, os.WriteFile(filepath.Join(dir, ScenarioFile), []byte(`{"name": "golden", "seed": 42}`), 0o644))
	res, err := ComputeFile("testdata/events.jsonl", goldenConfig)
	require.NoError(t, err)
	require.NoError(t, WriteAll(dir, res))
	page, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	require.NoError(t, err)
	for _, s := range []string{`id="scenario"`, `&#34;seed&#34;: 42`, `id="completed"`} {
		assert.True(t, strings.Contains(string(page), s), "report.html lacks %q", s)
	}
}

// TestRenderSVGNoData: a chart with nothing to draw says so instead of showing empty axes.
func TestRenderSVGNoData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		series []Series
		empty  bool
	}{
		{"no series", nil, true},
		{"series without points", []Series{{Name: "p50"}}, true},
		{"one point", []Series{{Name: "p50", Points: []Point{{1, 2}}}}, false},
		{"a line", []Series{{Name: "p50", Points: []Point{{1, 2}, {2, 3}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svg, err := RenderSVG(Chart{ID: "x", Title: "t", Series: tc.series, Spans: []Span{{From: 1, To: 2, Label: "f"}}}, ChartWidth, ChartHeight)
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
		ev(ledger.EventRunStart, 0, nil),
		ev(ledger.EventNote, 0, func(e *ledger.Event) { e.Message = "a plain note with [a link](x.md)" }),
		done("a", 1, ledger.OutcomeOK),
		ev(ledger.EventNote, 2, func(e *ledger.Event) { e.Source, e.Detail, e.Message = "forensics", "forensics/wedge-120000", note }),
	}
	res := Compute(evs, Config{})
	require.Equal(t, []ForensicsBundle{{Dir: "forensics/wedge-120000", Note: note}}, res.Forensics)

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
			events := readEvents(t, "testdata/events.jsonl")
			for i := range events {
				if events[i].Type == ledger.EventRunStart {
					events[i].Mode = mode
				}
			}
			res := Compute(events, goldenConfig)
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
