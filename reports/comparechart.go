package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// This file holds compare.html's and the trend page's charts, drawn with gonum/plot as
// inline SVG, so the pages need nothing from the network. It is kept to one file so that
// the charts can move onto report.html's shared renderer.

// CompareSeries is one line of a chart.
type CompareSeries struct {
	Name string
	XY   [][2]float64
	// Marks are points drawn as crosses (failing nights on the trend page).
	Marks [][2]float64
}

// TimelineBins is how many bins a compare timeline has.
const TimelineBins = 60

// CompareTimeline is the figures behind compare.html's overlaid timelines: per bin of the run's
// clock (seconds from its start), requests completed per second and the median TTFT of
// the requests that completed in the bin.
type CompareTimeline struct {
	Throughput [][2]float64 `json:"throughput"`
	TTFT       [][2]float64 `json:"ttft_p50"`
}

// BuildCompareTimeline bins a run's terminal requests over span seconds.
func BuildCompareTimeline(s *Samples, span float64) CompareTimeline {
	var tl CompareTimeline
	if s == nil || len(s.Points) == 0 || span <= 0 {
		return tl
	}
	width := span / TimelineBins
	counts := make([]int, TimelineBins)
	ttfts := make([][]float64, TimelineBins)
	for _, p := range s.Points {
		i := int(p.Done.Sub(s.Start).Seconds() / width)
		if i < 0 || i >= TimelineBins {
			i = max(0, min(i, TimelineBins-1))
		}
		counts[i]++
		if p.TTFT > 0 {
			ttfts[i] = append(ttfts[i], p.TTFT)
		}
	}
	for i := range TimelineBins {
		mid := round((float64(i) + 0.5) * width)
		tl.Throughput = append(tl.Throughput, [2]float64{mid, round(float64(counts[i]) / width)})
		if len(ttfts[i]) > 0 {
			sort.Float64s(ttfts[i])
			tl.TTFT = append(tl.TTFT, [2]float64{mid, round(quantile(ttfts[i], 0.5))})
		}
	}
	return tl
}

var comparePalette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// ChartSVG renders a line chart as an SVG element for inlining in HTML (no XML
// prologue, no fonts embedded: the browser's sans-serif is used).
func ChartSVG(title, xLabel, yLabel string, series []CompareSeries) (template.HTML, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	top := 0.0
	for _, s := range series {
		for _, v := range s.XY {
			top = math.Max(top, v[1])
		}
	}
	for i, s := range series {
		if len(s.XY) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(s.XY))
		for j, v := range s.XY {
			xys[j].X, xys[j].Y = v[0], v[1]
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return "", fmt.Errorf("reports: chart %s: %w", title, err)
		}
		c := comparePalette[i%len(comparePalette)]
		l.Color, pts.Color = c, c
		pts.Radius = vg.Points(1.5)
		p.Add(l, pts)
		p.Legend.Add(s.Name, l)
		if len(s.Marks) > 0 {
			mxy := make(plotter.XYs, len(s.Marks))
			for j, v := range s.Marks {
				mxy[j].X, mxy[j].Y = v[0], v[1]
			}
			sc, err := plotter.NewScatter(mxy)
			if err != nil {
				return "", fmt.Errorf("reports: chart %s: %w", title, err)
			}
			sc.Shape = draw.CrossGlyph{}
			sc.Radius = vg.Points(5)
			sc.Color = comparePalette[1]
			p.Add(sc)
			p.Legend.Add("failing", sc)
		}
	}
	// Headroom above the data for the legend, which sits top right.
	p.Y.Max = top * 1.3
	if p.Y.Max <= p.Y.Min {
		p.Y.Max = p.Y.Min + 1
	}
	c := vgsvg.NewWith(vgsvg.UseWH(7*vg.Inch, 2.6*vg.Inch), vgsvg.EmbedFonts(false))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("reports: chart %s: %w", title, err)
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i >= 0 {
		svg = svg[i:]
	}
	return template.HTML(svg), nil // gonum's own output: SVGo escapes the text it draws
}

const pageStyle = `body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.reg{background:#fdd;font-weight:bold}.fail{color:#b00;font-weight:bold}
.pass{color:#070}svg{max-width:100%;height:auto;display:block;margin:.5em 0}code{background:#f4f4f4}
.charts svg{display:inline-block;width:49%;margin:0}`

var compareTmpl = template.Must(template.New("compare").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>compare {{.C.New.Scenario}}</title><style>` + pageStyle + `</style></head>
<body>
<h1>compare {{.C.New.Scenario}}: <span class="{{if .C.Regressed}}fail{{else}}pass{{end}}">{{.C.VerdictText}}</span></h1>
<p>BASE: {{.C.Base.Verdict}}, seed {{.C.Base.Seed}}, {{.C.Base.Requests}} requests, {{.C.Base.Target}} (digest {{.C.BaseDigest}}){{if .C.BaseReport}}, <a href="{{.C.BaseReport}}">report</a>{{end}}<br>
NEW: {{.C.New.Verdict}}, seed {{.C.New.Seed}}, {{.C.New.Requests}} requests, {{.C.New.Target}} (digest {{.C.NewDigest}}){{if .C.NewReport}}, <a href="{{.C.NewReport}}">report</a>{{end}}</p>
{{if .C.Forced}}<p class="fail">Forced: the scenarios differ; compared anyway with --force.</p>{{end}}
{{if .C.Regressed}}<h2>Regressions</h2><ul>{{range .C.Regressions}}<li>{{.}}</li>{{end}}</ul>{{end}}
<h2>Timelines (both runs, seconds from each run's start)</h2>
{{.Throughput}}
{{.TTFT}}
{{range .Groups}}<h2>{{.Title}}</h2>
<table><tr><th>figure</th><th>BASE</th><th>NEW</th><th>change</th><th>interval / p</th></tr>
{{range .Rows}}<tr{{if .Regression}} class="reg" title="{{.Why}}"{{end}}><td>{{.Figure}}</td><td>{{.Base}}</td><td>{{.New}}</td><td>{{.Change}}</td><td>{{.Stat}}</td></tr>
{{end}}</table>{{end}}
</body></html>
`))

type htmlRow struct {
	Figure, Base, New, Change, Stat, Why string
	Regression                           bool
}

type htmlGroup struct {
	Title string
	Rows  []htmlRow
}

// WriteCompareHTML writes compare.html: the verdict, both runs' timelines overlaid and
// the table of every figure.
func WriteCompareHTML(w io.Writer, c *Comparison, base, new *Samples) error {
	span := math.Max(c.Base.Duration, c.New.Duration)
	bt, nt := BuildCompareTimeline(base, span), BuildCompareTimeline(new, span)
	thr, err := ChartSVG("requests completed per second", "seconds", "req/s", []CompareSeries{{Name: "BASE", XY: bt.Throughput}, {Name: "NEW", XY: nt.Throughput}})
	if err != nil {
		return err
	}
	ttft, err := ChartSVG("TTFT p50 of the requests completed in each bin", "seconds", "TTFT (s)", []CompareSeries{{Name: "BASE", XY: bt.TTFT}, {Name: "NEW", XY: nt.TTFT}})
	if err != nil {
		return err
	}
	var groups []htmlGroup
	for _, r := range c.Rows {
		if len(groups) == 0 || groups[len(groups)-1].Title != r.Group {
			groups = append(groups, htmlGroup{Title: r.Group})
		}
		stat := ""
		switch {
		case r.CI != nil:
			stat = fmt.Sprintf("[%+.1f%%, %+.1f%%]", 100*r.CI.Lo, 100*r.CI.Hi)
		case r.P != nil:
			stat = fmt.Sprintf("p = %.2g", *r.P)
		case strings.HasPrefix(r.Why, "not gated"):
			stat = "too few samples"
		}
		g := &groups[len(groups)-1]
		g.Rows = append(g.Rows, htmlRow{Figure: r.Figure, Base: fmtFig(r.Base, r.Unit), New: fmtFig(r.New, r.Unit), Change: r.Change(), Stat: stat, Why: r.Why, Regression: r.Regression})
	}
	err = compareTmpl.Execute(w, map[string]any{"C": c, "Throughput": thr, "TTFT": ttft, "Groups": groups})
	if err != nil {
		return fmt.Errorf("reports: write compare.html: %w", err)
	}
	return nil
}
