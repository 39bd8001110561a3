package render

import (
	"fmt"
	"sort"
	"strings"

	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

// causesMarkdown is summary.md's Causes and Target liveness sections ("" when the
// run has neither).
func causesMarkdown(r *reports.Results) string {
	var b strings.Builder
	if len(r.Causes) > 0 {
		names := format.SortedKeys(r.ByWorkload)
		b.WriteString("\n## Causes\n\nWhat explains each outcome other than ok (`unexplained`: nothing declared does).\n\n| cause | count |")
		for _, w := range names {
			fmt.Fprintf(&b, " %s |", mdEscape(w))
		}
		b.WriteString("\n|---|---:|" + strings.Repeat("---:|", len(names)) + "\n")
		for _, c := range sortedCauses(r.Causes) {
			fmt.Fprintf(&b, "| %s | %d |", mdEscape(c), r.Causes[c])
			for _, w := range names {
				fmt.Fprintf(&b, " %d |", r.ByWorkload[w].Causes[c])
			}
			b.WriteString("\n")
		}
	}
	if len(r.Liveness) > 0 {
		b.WriteString("\n## Target liveness\n\n| source | down (s) | back (s) | explained by |\n|---|---:|---:|---|\n")
		for _, l := range r.Liveness {
			by := "**nothing**"
			if l.Explained() {
				by = "fault " + mdEscape(l.Fault)
			}
			fmt.Fprintf(&b, "| %s | %.1f | %s | %s |\n", mdEscape(l.Source), l.Down, optSeconds(l.Up, "%.1f"), by)
		}
	}
	return b.String()
}

// causeLine is junit's system-out addition: " causes: fault:kill=3 refused=2; agents:
// fault:kill=3 refused=2", overall then per workload.
func causeLine(r *reports.Results) string {
	if len(r.Causes) == 0 {
		return ""
	}
	line := func(m map[string]int) string {
		parts := make([]string, 0, len(m))
		for _, c := range sortedCauses(m) {
			parts = append(parts, fmt.Sprintf("%s=%d", c, m[c]))
		}
		return strings.Join(parts, " ")
	}
	out := " causes: " + line(r.Causes)
	for _, w := range format.SortedKeys(r.ByWorkload) {
		if c := r.ByWorkload[w].Causes; len(c) > 0 {
			out += "; " + w + ": " + line(c)
		}
	}
	return out
}

func sortedCauses(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diagnosisLine is summary.md's first line about the silent drops ("" without one).
func diagnosisLine(r *reports.Results) string {
	if r.DropDiagnosis == "" {
		return ""
	}
	return "**Diagnosis:** " + mdEscape(r.DropDiagnosis) + ".\n\n"
}
