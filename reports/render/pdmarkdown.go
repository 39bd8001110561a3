package render

import (
	"fmt"
	"strings"

	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

// pdMarkdown is summary.md's PD path and health sections: the prefill share as runs of
// windows (a long soak has hundreds), and every health_lies finding.
func pdMarkdown(r *reports.Results) string {
	var b strings.Builder
	if pd := r.PDPath; pd != nil && pd.Share != nil {
		fmt.Fprintf(&b, "\n## PD path\n\n%s of %d ok requests went through a prefill worker (%s).", format.Pct(*pd.Share), pd.OK, mdEscape(pd.CounterNames()))
		if pd.Unjudged > 0 {
			fmt.Fprintf(&b, " %s not judged (their first token came within a reading of a prefill process going dark).", format.Plural(pd.Unjudged, "ok request"))
		}
		b.WriteString("\n\n| seconds since load start | ok requests | prefills | share |\n|---|---:|---:|---|\n")
		type run struct {
			from, to  float64
			ok        int
			pre       float64
			below, na bool
		}
		var runs []run
		for _, w := range pd.Windows {
			na := w.Share == nil
			if n := len(runs); n > 0 && runs[n-1].below == w.Below && runs[n-1].na == na {
				runs[n-1].to, runs[n-1].ok, runs[n-1].pre = w.End, runs[n-1].ok+w.OK, runs[n-1].pre+w.Prefills
				continue
			}
			runs = append(runs, run{w.Start, w.End, w.OK, w.Prefills, w.Below, na})
		}
		for _, x := range runs {
			share := "—"
			if x.ok > 0 {
				share = format.Pct(min(1, x.pre/float64(x.ok)))
				if x.below {
					share = "**" + share + "** (below " + format.Pct(pd.MinShare) + ")"
				}
			}
			fmt.Fprintf(&b, "| %g–%g | %d | %.0f | %s |\n", x.from, x.to, x.ok, x.pre, share)
		}
	}
	if len(r.HealthLies) > 0 {
		b.WriteString("\n## Health lies\n\n| process | from (s) | to (s) | probes 200 | requests, all failed | detail |\n|---|---:|---:|---:|---:|---|\n")
		for _, l := range r.HealthLies {
			fmt.Fprintf(&b, "| %s | %g | %g | %d | %d | %s |\n", mdEscape(l.Source), l.Start, l.End, l.Probes, l.Requests, mdEscape(l.Detail))
		}
	}
	return b.String()
}
