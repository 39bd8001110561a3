package render

import (
	"fmt"
	"io"
	"strings"

	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

// WriteCompareMarkdown writes compare.md.
func WriteCompareMarkdown(w io.Writer, c *reports.Comparison) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# compare %s: %s\n\n", mdEscape(c.New.Scenario), c.VerdictText())
	fmt.Fprintf(&b, "- BASE: %s, seed %d, %s, %s, started %s (digest %s)\n", c.Base.Verdict, c.Base.Seed, format.Plural(c.Base.Requests, "request"), mdEscape(c.Base.Target), c.Base.Start.UTC().Format("2006-01-02 15:04:05Z"), c.BaseDigest)
	fmt.Fprintf(&b, "- NEW: %s, seed %d, %s, %s, started %s (digest %s)\n", c.New.Verdict, c.New.Seed, format.Plural(c.New.Requests, "request"), mdEscape(c.New.Target), c.New.Start.UTC().Format("2006-01-02 15:04:05Z"), c.NewDigest)
	fmt.Fprintf(&b, "- gates: latency regresses when the %g%% bootstrap interval (%d resamples; an agent's turns are resampled together, open-loop requests one by one, ITL by whole requests) of its relative change lies above its floor and it grew by at least its absolute floor (%s); an outcome rate when a two-proportion z-test gives p < %g and it moved by ≥ %g; any silent drop in NEW where BASE had none; a percentile with fewer than %d samples beyond it (on either side) is shown, not gated\n",
		100*c.Options.Level, c.Options.Resamples, floorsText(c.Options.Floors), c.Options.Alpha, c.Options.MinRateChange, c.Options.MinTail)
	writeGateNotes(&b, c)
	if c.Forced && c.BaseDigest != c.NewDigest {
		b.WriteString("\n**Forced:** the scenarios differ (digests " + c.BaseDigest + " and " + c.NewDigest + "); compared anyway with --force.\n")
	}
	if len(c.Regressions) > 0 {
		if c.Inconclusive() {
			b.WriteString("\n## Would-be regressions (not judged: " + c.InconclusiveCause() + ")\n\n")
		} else {
			b.WriteString("\n## Regressions\n\n")
		}
		for _, r := range c.Regressions {
			fmt.Fprintf(&b, "- %s\n", mdEscape(r))
		}
	}
	group := ""
	for _, r := range c.Rows {
		if r.Group != group {
			group = r.Group
			title := "Run"
			if group != "run" {
				title = "Workload " + strings.TrimPrefix(group, "workload ")
			}
			fmt.Fprintf(&b, "\n## %s\n\n| figure | BASE | NEW | change | 95%% interval / p | |\n|---|---:|---:|---:|---:|---|\n", mdEscape(title))
		}
		stat := r.Stat()
		flag := ""
		if r.Regression {
			flag = "**REGRESSION**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdEscape(r.Figure), baseCell(r), format.Figure(r.New, r.Unit), r.Change(), stat, flag)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("render: write compare: %w", err)
	}
	return nil
}
