package render

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"strings"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

// This file holds compare.html: both runs' Timelines (the figures report.html draws) laid
// out as overlaid Charts on one time axis and drawn by RenderSVG, like report.html's.

// Colours of the two runs: BASE in blues, NEW in reds; the darker shade is the main line.
var (
	baseColors = []color.Color{color.RGBA{21, 101, 192, 255}, color.RGBA{100, 181, 246, 255}}
	newColors  = []color.Color{color.RGBA{198, 40, 40, 255}, color.RGBA{239, 154, 154, 255}}
)

// CompareCharts lays out both runs' timelines on one time axis (seconds since each run's
// load start): requests completed per second (all outcomes, and those not ok when any
// were), TTFT p50 and p99, with both runs' fault windows shaded and their recovery points
// and silent drops marked.
func CompareCharts(base, new *reports.Timeline) []Chart {
	if base == nil {
		base = &reports.Timeline{}
	}
	if new == nil {
		new = &reports.Timeline{}
	}
	var spans []reports.Span
	var vlines []VLine
	var marks []float64
	for _, run := range []struct {
		name string
		tl   *reports.Timeline
	}{{"BASE", base}, {"NEW", new}} {
		sp, vl, mk := faultLayers(run.tl)
		for _, s := range sp {
			if i := sameSpan(spans, s); i >= 0 {
				// The same fault at (about) the same time in both runs: one band, not two
				// overlapping ones.
				spans[i].From, spans[i].To = math.Min(spans[i].From, s.From), math.Max(spans[i].To, s.To)
				spans[i].Label = strings.TrimPrefix(spans[i].Label, "BASE ") + ", both runs"
				continue
			}
			s.Label = run.name + " " + s.Label
			spans = append(spans, s)
		}
		for _, v := range vl {
			v.Label = run.name + " " + v.Label
			vlines = append(vlines, v)
		}
		marks = append(marks, mk...)
	}
	colors := map[string]color.Color{}
	overlay := func(id, title, ylabel string, pick func(*reports.Timeline) []reports.Series) Chart {
		c := Chart{ID: id, Title: title, XLabel: "seconds since load start", YLabel: ylabel,
			XMax: math.Max(base.Duration, new.Duration), Spans: spans, VLines: vlines, Marks: marks,
			MarkLabel: "silent drop (either run)", Colors: colors}
		// No gap breaks: closed-loop agents leave windows without a completion, and
		// broken lines would read as scattered dots; the fault bands say where load stopped.
		for _, run := range []struct {
			name   string
			tl     *reports.Timeline
			colors []color.Color
		}{{"BASE", base, baseColors}, {"NEW", new, newColors}} {
			for i, s := range pick(run.tl) {
				s.Name = run.name + " " + s.Name
				colors[s.Name] = run.colors[min(i, len(run.colors)-1)]
				c.Series = append(c.Series, s)
			}
		}
		return c
	}
	return []Chart{
		overlay("cmp_completed", "Requests completed per second", "requests/s", completedTotals),
		overlay("cmp_ttft", "Time to first token, p50 and p99 (by scheduled time)", "seconds", func(tl *reports.Timeline) []reports.Series {
			return pickSeries(tl.TTFT, "p50", "p99")
		}),
		overlay("cmp_itl", "Inter-token latency, p50 and p99 (by scheduled time)", "seconds", func(tl *reports.Timeline) []reports.Series {
			return pickSeries(tl.ITL, "p50", "p99")
		}),
		overlay("cmp_e2e", "End-to-end latency, p50 and p99 (by scheduled time)", "seconds", func(tl *reports.Timeline) []reports.Series {
			return pickSeries(tl.E2E, "p50", "p99")
		}),
	}
}

// sameSpan finds BASE's band for the same fault as s within a second at both ends, or -1.
func sameSpan(spans []reports.Span, s reports.Span) int {
	for i, b := range spans {
		if b.Label == "BASE "+s.Label && math.Abs(b.From-s.From) < 1 && math.Abs(b.To-s.To) < 1 {
			return i
		}
	}
	return -1
}

// completedTotals sums a timeline's per-outcome series into "all" and, when any request
// was not ok, "not ok".
func completedTotals(tl *reports.Timeline) []reports.Series {
	if len(tl.Completed) == 0 {
		return nil
	}
	tops := stack(tl.Completed)
	out := []reports.Series{{Name: "all", Points: tops[len(tops)-1]}}
	var bad []reports.Series
	for _, s := range tl.Completed {
		if s.Name != string(ledger.OutcomeOK) {
			bad = append(bad, s)
		}
	}
	if len(bad) > 0 {
		t := stack(bad)
		out = append(out, reports.Series{Name: "not ok", Points: t[len(t)-1]})
	}
	return out
}

// pickSeries returns the named series of ss in the order asked.
func pickSeries(ss []reports.Series, names ...string) []reports.Series {
	var out []reports.Series
	for _, n := range names {
		for _, s := range ss {
			if s.Name == n {
				out = append(out, s)
			}
		}
	}
	return out
}

const pageStyle = `body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.reg{background:#fdd;font-weight:bold}.fail{color:#b00;font-weight:bold}
.pass{color:#070}svg{max-width:100%;height:auto;display:block;margin:.5em 0}code{background:#f4f4f4}
.charts svg{display:inline-block;width:49%;margin:0}.warn{color:#9a6700;font-weight:bold}.legend{color:#555}
.charts figure.trend{display:inline-block;width:49%;margin:0 0 .5em;vertical-align:top}.charts figure.trend svg{width:100%}
figcaption{font-weight:bold;font-size:13px;margin:.3em 0 0 .5em}`

var compareTmpl = template.Must(template.New("compare").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>compare {{.C.New.Scenario}}</title><style>` + pageStyle + `</style></head>
<body>
<h1>compare {{.C.New.Scenario}}: <span class="{{if .C.Regressed}}fail{{else if .C.Inconclusive}}warn{{else}}pass{{end}}">{{if .C.Inconclusive}}INCONCLUSIVE ({{.C.InconclusiveCause}}){{else}}{{.C.VerdictText}}{{end}}</span></h1>
<p>BASE: {{.C.Base.Verdict}}, seed {{.C.Base.Seed}}, {{.C.Base.Requests}} requests, {{.C.Base.Target}} (digest {{.C.BaseDigest}}){{if .C.BaseReport}}, <a href="{{.C.BaseReport}}">report</a>{{end}}<br>
NEW: {{.C.New.Verdict}}, seed {{.C.New.Seed}}, {{.C.New.Requests}} requests, {{.C.New.Target}} (digest {{.C.NewDigest}}){{if .C.NewReport}}, <a href="{{.C.NewReport}}">report</a>{{end}}</p>
{{if and .C.Forced (ne .C.BaseDigest .C.NewDigest)}}<p class="fail">Forced: the scenarios differ; compared anyway with --force.</p>{{end}}
{{if .C.Differences}}<p class="fail">Forced: the runs' provenance differs ({{range $i, $d := .C.Differences}}{{if $i}}; {{end}}{{$d}}{{end}}); compared anyway with --force.</p>{{end}}
{{range .Contention}}<p class="legend">{{.}}</p>{{end}}
{{if .C.Inconclusive}}<p class="warn">Inconclusive: {{range $i, $d := .C.NotJudged}}{{if $i}}; {{end}}{{$d}}{{end}}. {{if .C.Contended}}The machine, not the server, may explain any difference: rerun on a quiet machine.{{else}}An invalid run is not whole: its figures cannot be trusted; rerun.{{end}}</p>{{end}}
{{if .Regs}}<h2>{{if .C.Inconclusive}}Would-be regressions (not judged){{else}}Regressions{{end}}</h2><ul>{{range .Regs}}<li>{{if .Anchor}}<a href="#{{.Anchor}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}</li>{{end}}</ul>{{end}}
<h2>Timelines</h2>
<p>Both runs on one time axis (seconds since each run's load start): BASE in blue, NEW in red; fault windows shaded, recoveries dashed.</p>
{{range .Charts}}{{.}}{{end}}
{{range .Groups}}<h2>{{.Title}}</h2>
<table><tr><th>figure</th><th>BASE</th><th>NEW</th><th>change</th><th>interval / p</th></tr>
{{range .Rows}}<tr{{if .Regression}} class="reg" title="{{.Why}}"{{end}}><td>{{if and .Regression .Anchor}}<a href="#{{.Anchor}}">{{.Figure}}</a>{{else}}{{.Figure}}{{end}}</td><td>{{.Base}}</td><td>{{.New}}</td><td>{{.Change}}</td><td>{{.Stat}}</td></tr>
{{end}}</table>{{end}}
</body></html>
`))

type htmlRow struct {
	Figure, Base, New, Change, Stat, Why string
	Regression                           bool
	// Anchor is the id of the chart that draws the figure ("" none).
	Anchor string
}

type htmlGroup struct {
	Title string
	Rows  []htmlRow
}

// WriteCompareHTML writes compare.html: the verdict, both runs' timelines (Results.Timeline)
// overlaid and the table of every figure.
func WriteCompareHTML(w io.Writer, c *reports.Comparison, base, new *reports.Timeline) error {
	var charts []template.HTML
	for _, ch := range CompareCharts(base, new) {
		svg, err := RenderSVG(ch, ChartWidth, ChartHeight)
		if err != nil {
			return err
		}
		charts = append(charts, template.HTML(svg)) // gonum's own output: it escapes the text it draws
	}
	var groups []htmlGroup
	for _, r := range c.Rows {
		if len(groups) == 0 || groups[len(groups)-1].Title != r.Group {
			groups = append(groups, htmlGroup{Title: r.Group})
		}
		g := &groups[len(groups)-1]
		g.Rows = append(g.Rows, htmlRow{Figure: r.Figure, Base: baseCell(r), New: format.Figure(r.New, r.Unit), Change: r.Change(), Stat: r.Stat(), Why: r.Why, Regression: r.Regression, Anchor: chartAnchor(r.Figure)})
	}
	if err := compareTmpl.Execute(w, map[string]any{"C": c, "Charts": charts, "Groups": groups, "Regs": regressionLinks(c), "Contention": c.ContentionLines()}); err != nil {
		return fmt.Errorf("render: write compare.html: %w", err)
	}
	return nil
}
