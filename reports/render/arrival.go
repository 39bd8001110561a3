package render

import (
	"fmt"
	"strings"

	"pdsoak/reports"
)

// arrivalsMarkdown is summary.md's section on replayed schedules ("" without one): per
// trace workload, the requests due and sent per bucket, and the largest send lag.
func arrivalsMarkdown(r *reports.Results) string {
	if len(r.Arrivals) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Trace arrivals (scheduled vs sent)\n\n| workload | bucket (s) | scheduled | sent | max send lag (s) |\n|---|---:|---|---|---:|\n")
	series := func(xs []int) string {
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, " ")
	}
	for _, c := range r.Arrivals {
		fmt.Fprintf(&b, "| %s | %g | %s | %s | %.3f |\n", mdEscape(c.Workload), c.BucketSeconds, series(c.Scheduled), series(c.Sent), c.MaxLagSeconds)
	}
	return b.String()
}
