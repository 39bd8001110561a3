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
	Measured  bool
	Runs      int    // result lines the value is the median of
	Pass      bool   // measured and within the goal
	Reason    string // why a figure is a MISS without a value: not run, failed, no metric
}

// Evaluate matches every figure of benchmarks against out. module is the module path
// that turns a benchmark's "./pkg" into the import path go test prints.
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
		failure := findFailure(out.Failures, pkg, b.Name)
		for _, f := range b.Figures {
			row := Row{Benchmark: b, Figure: f}
			var values []float64
			for _, r := range results {
				if v, ok := r.Metrics[f.Metric]; ok {
					values = append(values, v)
				}
			}
			switch {
			case failure != "":
				row.Reason = failure
			case len(results) == 0:
				row.Reason = "not run: benchmark not found"
			case len(values) == 0:
				row.Reason = fmt.Sprintf("benchmark did not report %q (it reported %s)", f.Metric, units(results))
			default:
				row.Value, row.Measured, row.Runs = median(values), true, len(values)
				row.Pass = !math.IsNaN(row.Value) && f.Goal.Met(row.Value)
			}
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

// findFailure says why the benchmark did not (fully) run: its own failure or skip, or
// its package's. "" when nothing failed.
func findFailure(fs []Failure, pkg, name string) string {
	pkgReason := ""
	for _, f := range fs {
		if f.Package != pkg && f.Package != "" {
			continue
		}
		switch {
		case f.NotRun && (f.Name == name || f.Name == ""):
			return "not run: " + orUnknown(f.Reason)
		case f.Name == name && f.Skipped:
			return "skipped: " + orUnknown(f.Reason)
		case f.Name == name:
			return "failed: " + orUnknown(f.Reason)
		case f.Name == "" && f.Package == pkg && pkgReason == "":
			pkgReason = "package failed: " + orUnknown(f.Reason)
		}
	}
	return pkgReason
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

// Markdown writes the table: one row per figure.
func Markdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| figure | benchmark | metric | goal | measured | result |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rows {
		measured, result := "—", "MISS"
		if r.Measured {
			measured = formatValue(r.Value)
			if r.Runs > 1 {
				measured += fmt.Sprintf(" (median of %d)", r.Runs)
			}
			if r.Pass {
				result = "PASS"
			}
		} else {
			result = "MISS: " + r.Reason
		}
		fmt.Fprintf(&b, "| %s | `%s` `%s` | `%s` | %s | %s | %s |\n", cell(r.Figure.What),
			strings.TrimPrefix(r.Benchmark.Package, "./"), r.Benchmark.Name, r.Figure.Metric,
			r.Figure.Goal, measured, cell(result))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is the line under the table: how many figures meet their goal.
func Summary(rows []Row) string {
	pass := 0
	for _, r := range rows {
		if r.Pass {
			pass++
		}
	}
	return fmt.Sprintf("%d of %d figures meet their goal.", pass, len(rows))
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
