package render

import (
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"

	"pdsoak/reports"
)

var trendTmpl = template.Must(template.New("trend").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pdsoak trend</title><style>` + pageStyle + `</style></head>
<body>
<h1>pdsoak: trend across runs</h1>
{{if .Problems}}<p class="fail">Skipped malformed history lines:</p><ul>{{range .Problems}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{range .Scenarios}}<h2 id="{{.Name}}">{{.Name}}</h2>
<p>{{.Runs}} runs, {{.Failing}} not passing (marked ▲ along the charts' bottom){{if gt (len .Digests) 1}}; the scenario changed over time (digests {{range .Digests}}{{.}} {{end}}){{end}}{{if .Changes}}; dashed lines mark where the scenario, backend, profile, server version or launch command changed{{end}}.</p>
<div class="charts">{{range .Charts}}<figure class="trend"><figcaption>{{.Caption}}</figcaption>{{.SVG}}</figure>{{end}}</div>
<table><tr><th>#</th><th>time (UTC)</th><th>label</th><th>verdict</th><th>changed</th><th>report</th></tr>
{{range .Rows}}<tr><td>{{.N}}</td><td>{{.Time}}</td><td>{{.Label}}</td><td class="{{.Verdict}}">{{.Verdict}}</td><td>{{.Changed}}</td><td>{{if .Link}}<a href="{{.Link}}">report.html</a>{{else}}-{{end}}</td></tr>
{{end}}</table>{{end}}
</body></html>
`))

// figureUnits are the trend charts' Y labels.
var figureUnits = map[string]string{"requests": "requests", "throughput": "requests/s", "silent_drops": "drops",
	"ok_rate": "fraction", "rejected_rate": "fraction", "ttft_p50": "seconds", "ttft_p99": "seconds",
	"itl_p99": "seconds", "e2e_p50": "seconds", "e2e_p99": "seconds"}

type trendRow struct {
	N                    int
	Time, Label, Verdict string
	Link                 string
	// Changed says what changed since the previous run ("" nothing).
	Changed string
}

type trendChart struct {
	Caption string
	SVG     template.HTML
}

type trendScenario struct {
	Name    string
	Runs    int
	Failing int
	Digests []string
	Changes int
	Charts  []trendChart
	Rows    []trendRow
}

// WriteTrend writes the trend page: per scenario, one chart per key figure across its
// runs in time order (x is the run's number), runs that did not pass marked, and a table
// linking each run's report. link returns a run's report.html as a path relative to the
// page, or "" when it cannot be reached. problems are the history lines that were skipped.
func WriteTrend(w io.Writer, entries []reports.HistoryEntry, problems []reports.HistoryProblem, link func(reports.HistoryEntry) string) error {
	by := map[string][]reports.HistoryEntry{}
	for _, e := range entries {
		by[e.Scenario] = append(by[e.Scenario], e)
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	var scs []trendScenario
	for _, name := range names {
		runs := by[name]
		sort.SliceStable(runs, func(i, j int) bool { return runs[i].Time.Before(runs[j].Time) })
		sc := trendScenario{Name: name, Runs: len(runs)}
		var vlines []VLine
		seen := map[string]bool{}
		for i, e := range runs {
			if !seen[e.Digest] {
				seen[e.Digest] = true
				sc.Digests = append(sc.Digests, e.Digest)
			}
			if e.Verdict != reports.VerdictPass {
				sc.Failing++
			}
			row := trendRow{N: i + 1, Time: e.Time.UTC().Format("2006-01-02 15:04"), Label: e.Label, Verdict: string(e.Verdict), Link: link(e)}
			if i > 0 {
				row.Changed = strings.Join(trendChanges(runs[i-1], e), "; ")
			}
			if row.Changed != "" {
				sc.Changes++
				vlines = append(vlines, VLine{X: float64(i) + 0.5, Label: "changed: " + row.Changed})
			}
			sc.Rows = append(sc.Rows, row)
		}
		for _, fig := range reports.KeyFigures {
			// The caption names the chart above it (HTML), so the small chart keeps its
			// room for the axes.
			ch := Chart{ID: "trend_" + sanitizeID(name+"_"+fig), XLabel: "run (the table's #)", YLabel: figureUnits[fig], MarkLabel: "not passing", Runs: true, VLines: vlines}
			s := reports.Series{} // one line per chart: its title names it
			for i, e := range runs {
				v, ok := e.Figures[fig]
				if !ok {
					continue
				}
				s.Points = append(s.Points, reports.Point{X: float64(i + 1), Y: v})
				if e.Verdict != reports.VerdictPass {
					ch.Marks = append(ch.Marks, float64(i+1))
				}
			}
			if len(s.Points) == 0 {
				continue
			}
			ch.Series = []reports.Series{s}
			svg, err := RenderSVG(ch, ChartWidth/2, ChartHeight)
			if err != nil {
				return err
			}
			// gonum's own output: it escapes the text it draws.
			sc.Charts = append(sc.Charts, trendChart{Caption: FigureLabel(fig) + " (" + figureUnits[fig] + ")", SVG: template.HTML(svg)})
		}
		scs = append(scs, sc)
	}
	ps := make([]string, len(problems))
	for i, p := range problems {
		ps[i] = p.String()
	}
	if err := trendTmpl.Execute(w, map[string]any{"Scenarios": scs, "Problems": ps}); err != nil {
		return fmt.Errorf("render: write trend: %w", err)
	}
	return nil
}
