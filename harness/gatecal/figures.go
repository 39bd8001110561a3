package gatecal

import (
	"fmt"
	"io"
	"strings"

	"pdsoak/reports"
)

// Metrics are the latency kinds the gate judges.
var Metrics = []string{"ttft", "itl", "e2e"}

// SweepRel are the relative floors (p50) the sweep tries; SweepTail the tail floors
// (p90, p99).
var (
	SweepRel  = []float64{0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.10}
	SweepTail = []float64{0.05, 0.10, 0.15, 0.20, 0.25, 0.35, 0.50}
)

// Goals of the gate (issue 21): false alarms at most 1% of same-server pairs, detection
// of a 10% slowdown at least 90% and of a 25% slowdown at least 99% (TTFT and ITL).
const (
	GoalFalseAlarm = 0.01
	GoalDetect10   = 0.90
	GoalDetect25   = 0.99
)

// metricOf is a row's latency kind ("p90(itl)" → "itl"; "" for other rows).
func metricOf(figure string) string {
	i, j := strings.IndexByte(figure, '('), strings.IndexByte(figure, ')')
	if i < 0 || j < i || !strings.HasPrefix(figure, "p") {
		return ""
	}
	return figure[i+1 : j]
}

// flags reports whether a pair has a row of metric (all metrics: "") that the floor
// gates; quantile "" takes every percentile.
func (p Pair) flags(metric, quantile string, f reports.Floor) bool {
	for _, r := range p.Rows {
		m := metricOf(r.Figure)
		if m == "" || metric != "" && m != metric || quantile != "" && !strings.HasPrefix(r.Figure, quantile+"(") {
			continue
		}
		if r.CI != nil && r.CI.Lo > f.For(quantileOf(r.Figure)) && r.New-r.Base >= f.Abs {
			return true
		}
	}
	return false
}

// Rate is the share of pairs of one slowdown (0: same-server) that a metric flags under
// floor f (metric "": any latency row, each with its own floor from floors).
func (r *Report) Rate(slowdown float64, metric, quantile string, floors map[string]reports.Floor) (rate float64, n int) {
	hits := 0
	for _, p := range r.Results {
		if p.Slowdown != slowdown {
			continue
		}
		n++
		hit := false
		for _, m := range Metrics {
			if metric == "" || metric == m {
				hit = hit || p.flags(m, quantile, floors[m])
			}
		}
		if hit {
			hits++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return float64(hits) / float64(n), n
}

// quantileOf is a row's quantile ("p90(itl)" → 0.9).
func quantileOf(figure string) float64 {
	switch {
	case strings.HasPrefix(figure, "p90("):
		return 0.9
	case strings.HasPrefix(figure, "p99("):
		return 0.99
	}
	return 0.5
}

// withRel is floors with metric's Rel replaced (its Tail kept).
func withRel(floors map[string]reports.Floor, metric string, rel float64) map[string]reports.Floor {
	return withFloor(floors, metric, func(f *reports.Floor) {
		f.Tail = f.For(0.99)
		f.Rel = rel
	})
}

// withTail is floors with metric's Tail replaced.
func withTail(floors map[string]reports.Floor, metric string, tail float64) map[string]reports.Floor {
	return withFloor(floors, metric, func(f *reports.Floor) { f.Tail = tail })
}

func withFloor(floors map[string]reports.Floor, metric string, fn func(*reports.Floor)) map[string]reports.Floor {
	out := map[string]reports.Floor{}
	for k, v := range floors {
		out[k] = v
	}
	f := out[metric]
	fn(&f)
	out[metric] = f
	return out
}

// Choose is, per metric, the smallest p50 floor of SweepRel whose p50 false-alarm rate
// is within GoalFalseAlarm, and the smallest tail floor of SweepTail whose p90 and p99
// false-alarm rate is (the last one when none is).
func (r *Report) Choose() (rel, tail map[string]float64) {
	rel, tail = map[string]float64{}, map[string]float64{}
	for _, m := range Metrics {
		rel[m] = SweepRel[len(SweepRel)-1]
		for _, v := range SweepRel {
			if fa, _ := r.Rate(0, m, "p50", withRel(r.Floors, m, v)); fa <= GoalFalseAlarm {
				rel[m] = v
				break
			}
		}
		tail[m] = SweepTail[len(SweepTail)-1]
		for _, v := range SweepTail {
			fl := withTail(r.Floors, m, v)
			f90, _ := r.Rate(0, m, "p90", fl)
			f99, _ := r.Rate(0, m, "p99", fl)
			if max(f90, f99) <= GoalFalseAlarm {
				tail[m] = v
				break
			}
		}
	}
	return rel, tail
}

// Met reports whether the gate's floors meet the goals: false alarms over every latency
// row, and detection of each slowdown on TTFT and on ITL. A goal with no pairs to
// measure it is not met: 0 of 0 is no evidence.
func (r *Report) Met() (bool, []string) {
	var why []string
	if fa, n := r.Rate(0, "", "", r.Floors); n == 0 {
		why = append(why, "false alarms not measured: no same-server pairs")
	} else if fa > GoalFalseAlarm {
		why = append(why, fmt.Sprintf("false alarms %.1f%% of %d same-server pairs (goal ≤ %g%%)", 100*fa, n, 100*GoalFalseAlarm))
	}
	if len(r.Slowdowns) == 0 {
		why = append(why, "detection not measured: no slowdowns")
	}
	for _, s := range r.Slowdowns {
		goal := GoalDetect10
		if s >= 0.25 {
			goal = GoalDetect25
		}
		for _, m := range []string{"ttft", "itl"} {
			if d, n := r.Rate(s, m, "", r.Floors); n == 0 {
				why = append(why, fmt.Sprintf("%s detection %g%% slower not measured: no pairs", strings.ToUpper(m), 100*s))
			} else if d < goal {
				why = append(why, fmt.Sprintf("%s detected in %.1f%% of %d pairs %g%% slower (goal ≥ %g%%)", strings.ToUpper(m), 100*d, n, 100*s, 100*goal))
			}
		}
	}
	return len(why) == 0, why
}

// WriteMarkdown writes the figures.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# gate calibration: %s, %s runs, %d pairs per kind\n\n", r.Scenario, r.Mode, r.Pairs)
	fmt.Fprintf(&b, "Floors: %s.\n\n", floorsLine(r.Floors))
	b.WriteString("## Rates with these floors\n\nShare of pairs with at least one gated row of the metric (any percentile, any group: run or workload).\n\n| metric | false alarms (same server) |")
	for _, s := range r.Slowdowns {
		fmt.Fprintf(&b, " detected, %g%% slower |", 100*s)
	}
	b.WriteString("\n|---|---:|")
	for range r.Slowdowns {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	rows := []struct{ label, metric, q string }{{"any latency row", "", ""}}
	for _, m := range Metrics {
		rows = append(rows, struct{ label, metric, q string }{strings.ToUpper(m), m, ""})
		for _, q := range []string{"p50", "p90", "p99"} {
			rows = append(rows, struct{ label, metric, q string }{"  " + strings.ToUpper(m) + " " + q, m, q})
		}
	}
	for _, row := range rows {
		fa, n := r.Rate(0, row.metric, row.q, r.Floors)
		fmt.Fprintf(&b, "| %s | %s |", row.label, pct(fa, n))
		for _, s := range r.Slowdowns {
			d, n := r.Rate(s, row.metric, row.q, r.Floors)
			fmt.Fprintf(&b, " %s |", pct(d, n))
		}
		b.WriteString("\n")
	}
	r.writeSweep(&b, "p50 floor sweep", "Each metric's rates as its p50 floor varies (its tail and absolute floors kept), over all its rows.", SweepRel, withRel)
	r.writeSweep(&b, "Tail floor sweep", "Each metric's rates as its p90/p99 floor varies (its p50 and absolute floors kept), over all its rows.", SweepTail, withTail)
	rel, tail := r.Choose()
	fmt.Fprintf(&b, "\nSmallest floors with false alarms ≤ %g%%: p50 TTFT %g%%, ITL %g%%, e2e %g%%; p90/p99 TTFT %g%%, ITL %g%%, e2e %g%%.\n",
		100*GoalFalseAlarm, 100*rel["ttft"], 100*rel["itl"], 100*rel["e2e"], 100*tail["ttft"], 100*tail["itl"], 100*tail["e2e"])
	if ok, why := r.Met(); ok {
		b.WriteString("\n**Goals met** (false alarms ≤ 1%, detection ≥ 90% at 10% slower and ≥ 99% at 25%, TTFT and ITL).\n")
	} else {
		b.WriteString("\n**Goals not met:** " + strings.Join(why, "; ") + ".\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) writeSweep(b *strings.Builder, title, what string, values []float64, with func(map[string]reports.Floor, string, float64) map[string]reports.Floor) {
	fmt.Fprintf(b, "\n## %s\n\n%s\n\n| metric | floor | false alarms |", title, what)
	for _, s := range r.Slowdowns {
		fmt.Fprintf(b, " detected %g%% |", 100*s)
	}
	b.WriteString("\n|---|---:|---:|")
	for range r.Slowdowns {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, m := range Metrics {
		for _, v := range values {
			fl := with(r.Floors, m, v)
			fa, n := r.Rate(0, m, "", fl)
			fmt.Fprintf(b, "| %s | %g%% | %s |", strings.ToUpper(m), 100*v, pct(fa, n))
			for _, s := range r.Slowdowns {
				d, n := r.Rate(s, m, "", fl)
				fmt.Fprintf(b, " %s |", pct(d, n))
			}
			b.WriteString("\n")
		}
	}
}

func pct(x float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*x, int(x*float64(n)+0.5), n)
}

func floorsLine(fs map[string]reports.Floor) string {
	var parts []string
	for _, m := range Metrics {
		f := fs[m]
		parts = append(parts, fmt.Sprintf("%s +%g%% (p90, p99: +%g%%) and %gms", strings.ToUpper(m), 100*f.Rel, 100*f.For(0.99), 1000*f.Abs))
	}
	return strings.Join(parts, ", ")
}
