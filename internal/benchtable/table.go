package benchtable

import (
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Row is one figure of the table.
type Row struct {
	Benchmark Benchmark
	Figure    Figure
	Value     float64 // the median over the benchmark's result lines; valid when Measured
	Min, Max  float64 // the spread of those values
	Measured  bool
	Runs      int       // result lines the value is the median of
	Loads     []RunLoad // the load around each run that reported a result (unknown ones left out)
	UnderLoad int       // runs of Loads that were under load (RunLoad.UnderLoad)
	NotRun    int       // runs not started (the budget was spent): not counted against the figure
	Pass      bool      // measured, within the goal, and no run failed
	Reason    string    // why a figure is a MISS: not run, failed (in any run), no metric
}

// Evaluate matches every figure of benchmarks against out. module is the module path
// that turns a benchmark's "./pkg" into the import path go test prints. With several runs
// of a benchmark the value is their median: PASS is the median meeting the goal, and a
// run that failed makes the figure a MISS whatever the others measured.
func Evaluate(benchmarks []Benchmark, out *Output, module string) []Row {
	var rows []Row
	for _, b := range benchmarks {
		pkg := importPath(module, b.Package)
		var results []Result
		for _, r := range out.Results {
			if r.Name == b.Name && r.Package == pkg {
				results = append(results, r)
			}
		}
		failure, notRun := findFailure(out.Failures, pkg, b.Name)
		for _, f := range b.Figures {
			row := Row{Benchmark: b, Figure: f}
			var values []float64
			for _, r := range results {
				if v, ok := r.Metrics[f.Metric]; ok {
					values = append(values, v)
					if r.Load != nil {
						row.Loads = append(row.Loads, *r.Load)
						if r.Load.UnderLoad() {
							row.UnderLoad++
						}
					}
				}
			}
			if len(values) > 0 {
				row.Value, row.Measured, row.Runs = median(values), true, len(values)
				row.Min, row.Max = slices.Min(values), slices.Max(values)
			}
			switch {
			case failure != "":
				row.Reason = failure
			case len(results) == 0 && notRun != "":
				row.Reason = notRun
			case len(results) == 0:
				row.Reason = "not run: benchmark not found"
			case len(values) == 0:
				row.Reason = fmt.Sprintf("benchmark did not report %q (it reported %s)", f.Metric, units(results))
			case len(values) < len(results):
				row.Reason = fmt.Sprintf("benchmark reported %q in %d of its %d runs", f.Metric, len(values), len(results))
			}
			if notRun != "" && len(results) > 0 {
				row.NotRun = countNotRun(out.Failures, pkg, b.Name)
			}
			row.Pass = row.Reason == "" && !f.Goal.Info && !math.IsNaN(row.Value) && f.Goal.Met(row.Value)
			rows = append(rows, row)
		}
	}
	return rows
}

// importPath turns "./server/kvtransfer" into "pdsoak/server/kvtransfer".
func importPath(module, rel string) string {
	rel = strings.TrimPrefix(path.Clean(rel), "./")
	if rel == "." {
		return module
	}
	return module + "/" + rel
}

// findFailure says why the benchmark failed in any of its runs: its own failure or skip,
// or its package's ("" when nothing failed); and, apart, why a run was not started.
func findFailure(fs []Failure, pkg, name string) (failure, notRun string) {
	pkgReason := ""
	for _, f := range fs {
		if f.Package != pkg && f.Package != "" {
			continue
		}
		switch {
		case f.NotRun && (f.Name == name || f.Name == ""):
			if notRun == "" {
				notRun = "not run: " + orUnknown(f.Reason)
			}
		case f.Name == name && f.Skipped:
			if failure == "" {
				failure = "skipped: " + orUnknown(f.Reason)
			}
		case f.Name == name:
			if failure == "" {
				failure = "failed: " + orUnknown(f.Reason)
			}
		case f.Name == "" && f.Package == pkg && pkgReason == "":
			pkgReason = "package failed: " + orUnknown(f.Reason)
		}
	}
	if failure == "" {
		failure = pkgReason
	}
	return failure, notRun
}

// countNotRun is how many runs of the benchmark were never started.
func countNotRun(fs []Failure, pkg, name string) int {
	n := 0
	for _, f := range fs {
		if f.NotRun && (f.Package == pkg || f.Package == "") && (f.Name == name || f.Name == "") {
			n++
		}
	}
	return n
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func units(rs []Result) string {
	var u []string
	for _, r := range rs {
		for k := range r.Metrics {
			if !slices.Contains(u, k) {
				u = append(u, k)
			}
		}
	}
	slices.Sort(u)
	return strings.Join(u, ", ")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Markdown writes the table: one row per figure, its median over the runs, their
// spread, and the machine's load around each run.
func Markdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| figure | benchmark | metric | goal | median | spread (min–max) | load avg before→after, each run | others' CPUs, each run | result |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		median, spread := "—", "—"
		if r.Measured {
			median = formatValue(r.Value)
			spread = fmt.Sprintf("%s–%s (%d runs)", formatValue(r.Min), formatValue(r.Max), r.Runs)
			if r.Runs == 1 {
				spread = "one run"
			}
			if r.NotRun > 0 {
				spread += fmt.Sprintf(", %d not run", r.NotRun)
			}
		}
		fmt.Fprintf(&b, "| %s | `%s` `%s` | `%s` | %s | %s | %s | %s | %s | %s |\n", cell(r.Figure.What),
			strings.TrimPrefix(r.Benchmark.Package, "./"), r.Benchmark.Name, r.Figure.Metric,
			r.Figure.Goal, median, spread, loads(r.Loads, false), loads(r.Loads, true), cell(result(r)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// result is the last cell: info, PASS or MISS (with the reason when there is one), and
// how many runs were under load.
func result(r Row) string {
	s := "MISS"
	switch {
	case r.Reason != "":
		s = "MISS: " + r.Reason
	case r.Figure.Goal.Info:
		s = "info"
	case r.Pass:
		s = "PASS"
	}
	if r.UnderLoad > 0 {
		s += fmt.Sprintf(", under load (%d of %d runs)", r.UnderLoad, len(r.Loads))
	}
	return s
}

// loads is each run's load average before and after ("0.94→1.21, ..."), or (others) the
// CPUs the rest of the machine used during it; "—" when none is known.
func loads(ls []RunLoad, others bool) string {
	var parts []string
	for _, l := range ls {
		if others {
			parts = append(parts, fmtLoad(l.OthersCPUs))
		} else {
			parts = append(parts, fmtLoad(l.Before)+"→"+fmtLoad(l.After))
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

func fmtLoad(v float64) string {
	if math.IsNaN(v) {
		return "?"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// Summary is the line under the table: how many figures meet their goal, and how many
// were measured under load.
func Summary(rows []Row) string {
	pass, goals, info, loaded := 0, 0, 0, 0
	for _, r := range rows {
		switch {
		case r.Figure.Goal.Info:
			info++
		case r.Pass:
			pass++
			goals++
		default:
			goals++
		}
		if r.UnderLoad > 0 {
			loaded++
		}
	}
	s := fmt.Sprintf("%d of %d figures meet their goal.", pass, goals)
	if info > 0 {
		s += fmt.Sprintf(" %d for information only.", info)
	}
	if loaded > 0 {
		s += fmt.Sprintf(" %d measured under load in at least one run.", loaded)
	}
	return s
}

// cell keeps a table cell on one line and its pipes literal.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// formatValue prints 4 significant digits, and whole numbers from 1000 on: 0.8259,
// 12.35, 11234.
func formatValue(v float64) string {
	if a := math.Abs(v); a >= 1000 && a < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
