package render

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gonum.org/v1/plot"
	pfont "gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"pdsoak/reports"
)

// Chart is one picture on a shared time axis: series drawn as lines (or stacked areas),
// shaded spans (fault windows), vertical lines (recovery points) and marks along the
// bottom (silent drops). It holds figures only; RenderSVG draws it. compare and trend
// pages reuse it with their own series.
type Chart struct {
	ID     string
	Title  string
	XLabel string
	YLabel string
	Series []reports.Series
	// Colors maps a series name to its colour; others take the palette in order.
	Colors map[string]color.Color
	// Stacked draws the series as stacked areas, the first at the bottom.
	Stacked bool
	// XMax fixes the right end of the X axis (0: from the data), so charts line up.
	XMax   float64
	Spans  []reports.Span
	VLines []VLine
	Marks  []float64
	// MarkLabel names the marks in the legend ("silent drop").
	MarkLabel string
	// Marks2 are a second kind of mark (unexplained errors), drawn in another colour.
	Marks2     []float64
	Mark2Label string
	// Note is a caption under the chart (a gauge that disagrees with /debug/requests).
	Note string
	// Runs says X is a run's number (1, 2, …, the trend page): the axis spans the runs
	// with whole-number ticks and every point gets a dot.
	Runs bool
	// Gap breaks a line where consecutive points are further apart than it (a window with
	// no sample), rather than draw a slope across it; 0: never.
	Gap float64
}

// VLine is a dashed vertical line with a label.
type VLine struct {
	X     float64
	Label string
}

// Chart sizes in report.html.
const (
	ChartWidth  = 26 * vg.Centimeter
	ChartHeight = 7 * vg.Centimeter
	// markColumns bounds the distinct mark positions drawn: marks closer than one column
	// share a glyph, so every drop is visible without one glyph per drop.
	markColumns = 1000
)

var (
	palette = []color.Color{
		color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
		color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
		color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
		color.RGBA{23, 190, 207, 255},
	}
	// OutcomeColors: green for ok, warm for explicit errors, red for silent drops.
	OutcomeColors = map[string]color.Color{
		"ok": color.RGBA{76, 175, 80, 255}, "rejected": color.RGBA{255, 193, 7, 255},
		"http_error": color.RGBA{255, 152, 0, 255}, "stream_error": color.RGBA{156, 39, 176, 255},
		"transport_error": color.RGBA{121, 85, 72, 255}, "truncated": color.RGBA{233, 30, 99, 255},
		"invalid": color.RGBA{63, 81, 181, 255}, "stalled": color.RGBA{211, 47, 47, 255},
		"deadline_exceeded": color.RGBA{120, 0, 0, 255}, "cancelled": color.RGBA{158, 158, 158, 255},
	}
	// PercentileColors for p50/p90/p99 lines.
	PercentileColors = map[string]color.Color{
		"p50": color.RGBA{33, 150, 243, 255}, "p90": color.RGBA{255, 152, 0, 255}, "p99": color.RGBA{211, 47, 47, 255},
	}
	spanColor    = color.NRGBA{255, 87, 34, 38}
	spanEdge     = color.NRGBA{230, 74, 25, 150}
	recoverColor = color.RGBA{46, 125, 50, 255}
	dropColor    = color.RGBA{198, 40, 40, 255}
	// unexplainedColor marks the errors nothing explains.
	unexplainedColor = color.RGBA{230, 120, 0, 255}
)

// RenderSVG draws c with gonum/plot into an SVG document (fonts not embedded, so it needs
// nothing from outside the page) sized w × h.
func RenderSVG(c Chart, w, h vg.Length) ([]byte, error) {
	p := plot.New()
	for _, f := range []*pfont.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		f.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.Title.Text = wrapTitle(p.Title.TextStyle, c.Title, titleWidth(w))
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Padding = vg.Points(1.5) // entries' text must not touch
	p.Add(plotter.NewGrid())
	p.X.Tick.Marker = roundTicker{}
	p.Y.Tick.Marker = padTicker{roundTicker{}}

	xmax, ymax := c.XMax, 0.0
	var tops [][]reports.Point
	if c.Stacked {
		tops = stack(c.Series)
	}
	for i, s := range c.Series {
		pts := s.Points
		if c.Stacked {
			pts = tops[i]
		}
		for _, pt := range pts {
			if c.XMax == 0 {
				xmax = math.Max(xmax, pt.X)
			}
			ymax = math.Max(ymax, pt.Y)
		}
	}
	for _, sp := range c.Spans {
		if c.XMax == 0 {
			xmax = math.Max(xmax, sp.To)
		}
	}
	if ymax <= 0 {
		ymax = 1
	}
	ytop := niceCeil(ymax * 1.3)                      // headroom for the fault labels; a round top gets round ticks
	p.X.Min, p.X.Max = 0, niceCeil(math.Max(xmax, 1)) // round ends give round ticks
	p.Y.Min, p.Y.Max = 0, ytop
	if c.Runs {
		p.X.Min, p.X.Max = 0.5, math.Max(xmax, 1)+0.5
		p.X.Tick.Marker = wholeTicker{}
	}

	// Fault windows under everything else.
	for _, sp := range c.Spans {
		to := sp.To
		if to <= sp.From {
			to = p.X.Max
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: sp.From, Y: 0}, {X: to, Y: 0}, {X: to, Y: ytop}, {X: sp.From, Y: ytop}})
		if err != nil {
			return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
		}
		poly.Color = spanColor
		poly.LineStyle.Color = spanEdge
		poly.LineStyle.Width = vg.Points(0.5)
		p.Add(poly)
	}

	col := func(i int, name string) color.Color {
		if cl, ok := c.Colors[name]; ok {
			return cl
		}
		return palette[i%len(palette)]
	}
	if c.Stacked {
		// Top first, so each lower area paints over the one above it.
		for i := len(c.Series) - 1; i >= 0; i-- {
			l, err := plotter.NewLine(xys(tops[i]))
			if err != nil {
				return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
			}
			cl := col(i, c.Series[i].Name)
			l.FillColor = cl
			l.StepStyle = plotter.MidStep // per-window counts: steps, not slopes
			l.LineStyle.Color = cl
			l.LineStyle.Width = vg.Points(0.5)
			p.Add(l)
		}
		for i, s := range c.Series {
			p.Legend.Add(s.Name, &swatch{col(i, s.Name)})
		}
	} else {
		for i, s := range c.Series {
			for k, run := range splitGaps(s.Points, c.Gap) {
				if len(run) == 1 || c.Runs {
					// A lone window has no line to draw: a dot shows it.
					sc, err := plotter.NewScatter(xys(run))
					if err != nil {
						return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
					}
					sc.GlyphStyle.Shape = draw.CircleGlyph{}
					sc.GlyphStyle.Color = col(i, s.Name)
					sc.GlyphStyle.Radius = vg.Points(2)
					p.Add(sc)
				}
				l, err := plotter.NewLine(xys(run))
				if err != nil {
					return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
				}
				l.LineStyle.Color = col(i, s.Name)
				l.LineStyle.Width = vg.Points(1.2)
				p.Add(l)
				if k == 0 && s.Name != "" {
					p.Legend.Add(s.Name, l)
				}
			}
		}
	}

	for _, v := range c.VLines {
		l, err := plotter.NewLine(plotter.XYs{{X: v.X, Y: 0}, {X: v.X, Y: ytop}})
		if err != nil {
			return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
		}
		l.LineStyle.Color = recoverColor
		l.LineStyle.Width = vg.Points(1.2)
		l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
	}
	labels, recovery := placeLabels(c, float64(w), p.X.Max, ytop)
	if len(labels.XYs) > 0 {
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Font.Variant = "Sans"
			lb.TextStyle[i].Font.Size = vg.Points(labelSize)
			lb.TextStyle[i].YAlign = draw.YTop
			lb.TextStyle[i].Color = color.RGBA{120, 40, 10, 255}
			if recovery[i] {
				lb.TextStyle[i].Color = recoverColor
			}
		}
		p.Add(lb)
	}

	if !hasData(c.Series) {
		// Empty axes look like a broken chart; say why there is nothing to draw.
		nd, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: p.X.Max / 2, Y: ytop / 2}}, Labels: []string{"no data"}})
		if err != nil {
			return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
		}
		nd.TextStyle[0].Font.Variant = "Sans"
		nd.TextStyle[0].Font.Size = vg.Points(14)
		nd.TextStyle[0].Color = color.Gray{Y: 120}
		nd.TextStyle[0].XAlign, nd.TextStyle[0].YAlign = draw.XCenter, draw.YCenter
		p.Add(nd)
	}

	if err := addMarks(p, c.Marks, ytop*0.03, draw.PyramidGlyph{}, dropColor, 3.5, c.MarkLabel); err != nil {
		return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
	}
	if err := addMarks(p, c.Marks2, ytop*0.07, draw.CrossGlyph{}, unexplainedColor, 3, c.Mark2Label); err != nil {
		return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
	}

	cv := vgsvg.NewWith(vgsvg.UseWH(w, h))
	p.Draw(draw.New(cv))
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("render: chart %s: %w", c.Title, err)
	}
	return inlineSVG(buf.Bytes(), c.ID), nil
}

// hasData says whether any series has a point to draw.
func hasData(ss []reports.Series) bool {
	for _, s := range ss {
		if len(s.Points) > 0 {
			return true
		}
	}
	return false
}

type swatch struct{ c color.Color }

// Thumbnail draws the legend entry of a stacked area.
func (s *swatch) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(s.c, c.ClipPolygonY(pts))
}

const (
	labelSize = 7.5
	labelRows = 3
)

// placeLabels puts the fault and recovery labels in up to labelRows rows along the top,
// each in the first row where it does not overlap the previous label; a label with no room
// is left out (its band or line is still drawn, and the faults table names it). Dense
// charts drop the fault type from the labels.
func placeLabels(c Chart, width, xmax, ytop float64) (plotter.XYLabels, []bool) {
	type lab struct {
		x        float64
		text     string
		recovery bool
	}
	var ls []lab
	for _, sp := range c.Spans {
		text := sp.Label
		if len(c.Spans) > 4 {
			text = strings.SplitN(text, " (", 2)[0]
		}
		ls = append(ls, lab{sp.From, " " + text, false})
	}
	for _, v := range c.VLines {
		ls = append(ls, lab{v.X, " " + v.Label, true})
	}
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].x < ls[j].x })
	// Data units per character: about 0.55 em at labelSize over a plot area ~60 pt narrower
	// than the canvas.
	perChar := 0.55 * labelSize * xmax / math.Max(width-60, 1)
	var end [labelRows]float64
	for r := range end {
		end[r] = math.Inf(-1)
	}
	var out plotter.XYLabels
	var rec []bool
	for _, l := range ls {
		for r := range labelRows {
			if l.x >= end[r] {
				end[r] = l.x + perChar*float64(utf8.RuneCountInString(l.text))
				out.XYs = append(out.XYs, plotter.XY{X: l.x, Y: ytop * (1 - 0.065*float64(r))})
				out.Labels = append(out.Labels, l.text)
				rec = append(rec, l.recovery)
				break
			}
		}
	}
	return out, rec
}

// roundTicker puts 4 to 10 major ticks at multiples of 1, 2 or 5 times a power of ten,
// labelled in their shortest form (0, 20, 40; 0.05, 0.1), with four minor ticks between.
type roundTicker struct{}

func (roundTicker) Ticks(min, max float64) []plot.Tick {
	if !(max > min) {
		return []plot.Tick{{Value: min, Label: strconv.FormatFloat(min, 'g', -1, 64)}}
	}
	raw := (max - min) / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	var ticks []plot.Tick
	for i := math.Ceil(min / step); i*step <= max*(1+1e-12); i++ {
		v := i * step
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(roundTo(v, step), 'g', -1, 64)})
		for k := 1; k < 5; k++ {
			if m := v + float64(k)*step/5; m <= max {
				ticks = append(ticks, plot.Tick{Value: m})
			}
		}
	}
	return ticks
}

// wholeTicker is roundTicker with whole numbers only (run numbers).
type wholeTicker struct{}

func (wholeTicker) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (roundTicker{}).Ticks(min, max) {
		if t.Value == math.Trunc(t.Value) {
			out = append(out, plot.Tick{Value: t.Value, Label: strconv.FormatFloat(t.Value, 'f', 0, 64)})
		}
	}
	return out
}

// roundTo removes float noise (0.30000000000000004) at the step's precision.
func roundTo(v, step float64) float64 {
	d := math.Pow(10, math.Max(0, -math.Floor(math.Log10(step))+1))
	return math.Round(v*d) / d
}

// padTicker left-pads Y tick labels with figure spaces to one width, so that every chart's
// plot area starts at the same X and the charts share one time axis on the page.
type padTicker struct{ plot.Ticker }

const tickWidth = 7

func (t padTicker) Ticks(min, max float64) []plot.Tick {
	ticks := t.Ticker.Ticks(min, max)
	for i := range ticks {
		if l := ticks[i].Label; l != "" && utf8.RuneCountInString(l) < tickWidth {
			ticks[i].Label = strings.Repeat("\u2007", tickWidth-utf8.RuneCountInString(l)) + l
		}
	}
	return ticks
}

// niceCeil rounds x > 0 up to 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten.
func niceCeil(x float64) float64 {
	if x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= x*(1-1e-12) {
			return m * p
		}
	}
	return 10 * p
}

// splitGaps cuts pts where consecutive X are more than gap apart.
func splitGaps(pts []reports.Point, gap float64) [][]reports.Point {
	if len(pts) == 0 {
		return nil
	}
	var out [][]reports.Point
	from := 0
	for i := 1; i < len(pts); i++ {
		if gap > 0 && pts[i].X-pts[i-1].X > gap {
			out = append(out, pts[from:i])
			from = i
		}
	}
	return append(out, pts[from:])
}

// stack turns series into cumulative tops on the union of their X values.
func stack(ss []reports.Series) [][]reports.Point {
	xsSet := map[float64]bool{}
	for _, s := range ss {
		for _, p := range s.Points {
			xsSet[p.X] = true
		}
	}
	xs := make([]float64, 0, len(xsSet))
	for x := range xsSet {
		xs = append(xs, x)
	}
	sort.Float64s(xs)
	base := make([]float64, len(xs))
	out := make([][]reports.Point, len(ss))
	for i, s := range ss {
		at := make(map[float64]float64, len(s.Points))
		for _, p := range s.Points {
			at[p.X] = p.Y
		}
		out[i] = make([]reports.Point, len(xs))
		for j, x := range xs {
			base[j] += at[x]
			out[i][j] = reports.Point{X: x, Y: base[j]}
		}
	}
	return out
}

// markPoints puts one glyph per occupied column along the bottom.
func markPoints(xs []float64, xmax, y float64) []reports.Point {
	seen := map[int]bool{}
	var out []reports.Point
	for _, x := range xs {
		col := int(x / xmax * markColumns)
		if seen[col] {
			continue
		}
		seen[col] = true
		out = append(out, reports.Point{X: x, Y: y})
	}
	return out
}

func xys(pts []reports.Point) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	for i, p := range pts {
		out[i] = plotter.XY{X: p.X, Y: p.Y}
	}
	return out
}

var (
	svgProlog = regexp.MustCompile(`(?s)^.*?<svg`)
	svgSize   = regexp.MustCompile(`^<svg[^>]*?(width="([0-9.]+)[a-z]*" height="([0-9.]+)[a-z]*")`)
)

// inlineSVG strips the XML prolog so the document can sit inside HTML, gives it an id and
// makes it scale with the page.
func inlineSVG(doc []byte, id string) []byte {
	doc = svgProlog.ReplaceAll(doc, []byte("<svg"))
	// gonum measures text with Liberation Sans; where the reader has none, Arial and
	// Helvetica have the same metrics, so labels still fit where they were placed.
	doc = bytes.ReplaceAll(doc, []byte("font-family:Liberation Sans;"), []byte("font-family:Liberation Sans,Arial,Helvetica,sans-serif;"))
	if m := svgSize.FindSubmatchIndex(doc); m != nil {
		attr := fmt.Sprintf(`class="chart" id="%s"`, id)
		if !bytes.Contains(doc[:bytes.IndexByte(doc, '>')], []byte("viewBox")) {
			attr += fmt.Sprintf(` viewBox="0 0 %s %s"`, doc[m[4]:m[5]], doc[m[6]:m[7]])
		}
		doc = append(append(append([]byte{}, doc[:m[2]]...), attr...), doc[m[3]:]...)
	}
	return doc
}

// addMarks draws marks (seconds) as glyphs at height y with a legend entry "label (n)";
// nothing when there are none.
func addMarks(p *plot.Plot, marks []float64, y float64, shape draw.GlyphDrawer, c color.Color, radius float64, label string) error {
	if len(marks) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(xys(markPoints(marks, p.X.Max, y)))
	if err != nil {
		return err
	}
	sc.GlyphStyle.Shape = shape
	sc.GlyphStyle.Color = c
	sc.GlyphStyle.Radius = vg.Points(radius)
	p.Add(sc)
	p.Legend.Add(fmt.Sprintf("%s (%d)", label, len(marks)), sc)
	return nil
}

// titleWidth is the widest a title line may be in a chart w wide: a tenth to spare, as a
// browser without Liberation Sans (or Arial) draws with a wider fallback.
func titleWidth(w vg.Length) vg.Length { return (w - 2*vg.Centimeter) * 9 / 10 }

// wrapTitle breaks a title into lines no wider than max at spaces, so a long title (a
// gauge's metric name in a half-width chart) shows whole instead of clipped at both edges.
// A single word wider than max keeps its own line.
func wrapTitle(sty text.Style, title string, max vg.Length) string {
	if sty.Width(title) <= max {
		return title
	}
	var lines []string
	line := ""
	for _, w := range strings.Fields(title) {
		if line != "" && sty.Width(line+" "+w) > max {
			lines, line = append(lines, line), w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}
