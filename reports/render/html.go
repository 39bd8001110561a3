package render

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gonum.org/v1/plot/vg"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

//go:embed report.html.tmpl
var reportTemplate string

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"secs":  func(s float64) string { return format.Seconds(s) },
	"fsecs": func(s *float64) string { return fmtOptSeconds(s) },
	"num":   func(f float64) string { return fmt.Sprintf("%.4g", f) },
	"pct": func(n, of int) string {
		if of == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f%%", 100*float64(n)/float64(of))
	},
	"bool": func(b *bool) string {
		if b == nil {
			return "–"
		}
		if *b {
			return "yes"
		}
		return "no"
	},
	"heldAt": func(raw json.RawMessage) string { return strings.Join(reports.HeldAt(raw), ", ") },
	"pretty": prettyJSON,
	"state":  func(s reports.State) string { return strings.ReplaceAll(string(s), "_", " ") },
	"join":   strings.Join,
	"stages": sortedStages,
}).Parse(reportTemplate))

// HTMLOptions carries what report.html shows besides the Results and the Timeline.
type HTMLOptions struct {
	// Scenario is the resolved scenario (scenario.json), shown collapsed; empty: omitted.
	Scenario []byte
}

type htmlChart struct {
	Chart
	SVG   template.HTML
	Small bool
}

type htmlPage struct {
	R        *reports.Results
	T        *reports.Timeline
	Charts   []htmlChart
	Outcomes []outcomeRow
	Latency  []latencyRow
	Scenario string
	Gauges   int
	OK       int
	// Notes are the Results' notes as plain text, less the forensics bundles' (shown as
	// links in their own section).
	Notes     []string
	Forensics []forensicsRow
}

type forensicsRow struct {
	Dir, Text string
}

// mdLink is a markdown link; report.html shows its text (the notes are written for
// summary.md), never the raw markdown.
var mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

func plainNote(s string) string { return mdLink.ReplaceAllString(s, "$1") }

type outcomeRow struct {
	Outcome ledger.Outcome
	Count   int
	Drop    bool
}

type latencyRow struct {
	Name string
	P    reports.Percentiles
}

// faultLayers are what every timeline chart draws over its series: the fault windows
// (shaded, labelled), the recovery points and the silent drops where they were scheduled.
func faultLayers(tl *reports.Timeline) ([]reports.Span, []VLine, []float64) {
	var spans []reports.Span
	var vlines []VLine
	for _, f := range tl.Faults {
		sp := reports.Span{From: f.Start, To: tl.Duration, Label: f.Name}
		if f.Type != "" {
			sp.Label += " (" + f.Type + ")"
		}
		if f.Stop != nil {
			sp.To = *f.Stop
		}
		if f.Recovered != nil && !*f.Recovered {
			sp.Label += " — not recovered"
		}
		spans = append(spans, sp)
		if f.RecoveredAt != nil {
			vlines = append(vlines, VLine{X: *f.RecoveredAt, Label: "recovered: " + f.Name})
		}
	}
	marks := make([]float64, len(tl.Drops))
	for i, d := range tl.Drops {
		marks[i] = d.At
	}
	return spans, vlines, marks
}

// Charts lays out tl as report.html's charts, all on one time axis with the fault windows
// shaded, recovery points marked and silent drops marked where they were scheduled.
func Charts(tl *reports.Timeline) []Chart {
	spans, vlines, marks := faultLayers(tl)
	const x = "seconds since load start"
	base := func(id, title, ylabel string, ss []reports.Series) Chart {
		return Chart{ID: id, Title: title, XLabel: x, YLabel: ylabel, Series: ss, XMax: tl.Duration,
			Spans: spans, VLines: vlines, Marks: marks, MarkLabel: "silent drop",
			Marks2: tl.Unexplained, Mark2Label: "unexplained error"}
	}
	out := []Chart{}
	c := base("completed", "Requests completed per second, by outcome", "requests/s", tl.Completed)
	c.Stacked, c.Colors = true, OutcomeColors
	out = append(out, c)
	for _, l := range []struct {
		id, title string
		ss        []reports.Series
	}{
		{"ttft", "Time to first token (by scheduled time)", tl.TTFT},
		{"itl", "Inter-token latency (by scheduled time)", tl.ITL},
		{"e2e", "End-to-end latency (by scheduled time)", tl.E2E},
	} {
		c := base(l.id, l.title, "seconds", l.ss)
		c.Colors, c.Gap = PercentileColors, 1.5*tl.Window
		out = append(out, c)
	}
	out = append(out, base("in_flight", "Requests in flight (scheduled, not yet done)", "requests", []reports.Series{tl.InFlight}))
	for _, g := range tl.Gauges {
		title, unit := "Server gauge "+g.Metric+" by process", format.ShortMetric(g.Metric)
		if t, u, ok := contentionChart(g.Metric); ok {
			title, unit = t, u
		}
		c := base("gauge_"+sanitizeID(g.Metric), title, unit, g.Series)
		c.Note = g.Note
		out = append(out, c)
	}
	if tl.PDShare != nil { // pd_path (the series from reports/pdreport.go)
		c := base("pd_share", "Share of ok requests through a prefill worker (pd_path), shaded where it fell", "percent", []reports.Series{*tl.PDShare})
		c.Spans, c.Gap = append(append([]reports.Span(nil), c.Spans...), tl.PDBelow...), 1.5*reports.PDWindow.Seconds()
		out = append(out, c)
	}
	if len(tl.GPUUtil) > 0 {
		out = append(out, base("gpu_util", "GPU utilisation", "percent", tl.GPUUtil))
	}
	if len(tl.GPUMem) > 0 {
		out = append(out, base("gpu_mem", "GPU memory used", "percent", tl.GPUMem))
	}
	return out
}

func sanitizeID(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// WriteHTML writes report.html: one self-contained page (inline CSS and SVG, no script,
// nothing fetched) with the verdict, the timelines and the tables.
func WriteHTML(w io.Writer, r *reports.Results, tl *reports.Timeline, opt HTMLOptions) error {
	if tl == nil {
		tl = &reports.Timeline{}
	}
	page := htmlPage{R: r, T: tl, Scenario: string(opt.Scenario), OK: r.Outcomes[ledger.OutcomeOK]}
	for _, c := range Charts(tl) {
		w, h := ChartWidth, ChartHeight
		small := strings.HasPrefix(c.ID, "gauge_") || strings.HasPrefix(c.ID, "gpu_")
		if small {
			w, h = ChartWidth/2, 7*vg.Centimeter
			page.Gauges++
		}
		svg, err := RenderSVG(c, w, h)
		if err != nil {
			return err
		}
		page.Charts = append(page.Charts, htmlChart{Chart: c, SVG: template.HTML(svg), Small: small})
	}
	bundle := map[string]bool{}
	for _, f := range r.Forensics {
		bundle[f.Note] = true
		dir := strings.TrimSuffix(f.Dir, "/")
		// "forensics bundle (trigger: reason): DIR, N files…": the row already names the
		// bundle and links it, so the text keeps the trigger and the counts.
		text := strings.Replace(strings.TrimPrefix(plainNote(f.Note), "forensics bundle "), ": "+dir+", ", ": ", 1)
		if i := strings.Index(text, "): "); strings.HasPrefix(text, "(") && i > 0 {
			text = text[1:i] + " — " + text[i+3:]
		}
		page.Forensics = append(page.Forensics, forensicsRow{Dir: dir, Text: text})
	}
	for _, n := range r.Notes {
		if !bundle[n] {
			page.Notes = append(page.Notes, plainNote(n))
		}
	}
	for _, o := range ledger.Outcomes {
		page.Outcomes = append(page.Outcomes, outcomeRow{o, r.Outcomes[o], o.SilentDrop()})
	}
	page.Latency = []latencyRow{{"TTFT", r.TTFT}, {"ITL", r.ITL}, {"E2E", r.E2E}, {"harness lag", r.Lag}}
	var buf bytes.Buffer
	if err := htmlTmpl.Execute(&buf, page); err != nil {
		return fmt.Errorf("render: write report.html: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("render: write report.html: %w", err)
	}
	return nil
}

// WriteHTMLFile writes dir/report.html, showing dir/scenario.json when it exists.
func WriteHTMLFile(dir string, r *reports.Results, tl *reports.Timeline) error {
	var opt HTMLOptions
	if data, err := os.ReadFile(filepath.Join(dir, reports.ScenarioFile)); err == nil {
		opt.Scenario = data
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r, tl, opt); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, reports.HTMLFile), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	return nil
}

func fmtOptSeconds(s *float64) string {
	if s == nil {
		return "–"
	}
	return format.Seconds(*s)
}

// prettyJSON indents raw as it is: decoding it would round large integers to float64
// and sort the keys, so the page would not show what results.json holds.
func prettyJSON(raw json.RawMessage) string {
	var out bytes.Buffer
	if json.Indent(&out, raw, "", "  ") != nil {
		return string(raw)
	}
	return out.String()
}

// sortedStages lists DropStages as "stage: n", most first.
func sortedStages(m map[string]int) []string {
	keys := format.SortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return out
}
