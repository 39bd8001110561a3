package render

import (
	"fmt"
	"strings"

	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

// floorsText is compare.md's statement of the per-metric floors.
func floorsText(fs map[string]reports.Floor) string {
	var parts []string
	for _, k := range []string{"ttft", "itl", "e2e"} {
		f := fs[k]
		parts = append(parts, fmt.Sprintf("%s +%g%% (p90, p99: +%g%%) and %s", strings.ToUpper(k), 100*f.Rel, 100*f.For(0.99), format.SecondsMicro(f.Abs)))
	}
	return strings.Join(parts, "; ")
}

// baseCell is the BASE value of a row, with the spread of several BASE runs.
func baseCell(r reports.Row) string {
	if r.Spread == nil {
		return format.Figure(r.Base, r.Unit)
	}
	return fmt.Sprintf("%s (runs %s–%s)", format.Figure(r.Base, r.Unit), format.Figure(r.Spread.Lo, ""), format.Figure(r.Spread.Hi, r.Unit))
}

// writeGateNotes adds the pooled baseline, each run's contention and the provenance
// differences to compare.md's header.
func writeGateNotes(b *strings.Builder, c *reports.Comparison) {
	if c.Bases > 1 {
		fmt.Fprintf(b, "- BASE pools %d runs: their requests (sessions kept apart per run) form one distribution; each latency row shows the lowest and highest of the runs' own percentiles\n", c.Bases)
	}
	for _, line := range c.ContentionLines() {
		fmt.Fprintf(b, "- %s\n", line)
	}
	if c.Inconclusive() {
		b.WriteString("\n**Inconclusive:** " + mdEscape(strings.Join(c.NotJudged(), "; ")) + ". " + notJudgedAdvice(c) + "\n")
	}
	if len(c.Differences) > 0 {
		b.WriteString("\n**Forced:** the runs' provenance differs (" + mdEscape(strings.Join(c.Differences, "; ")) + "); compared anyway with --force.\n")
	}
}

// notJudgedAdvice says why an inconclusive answer's differences are not the server's.
func notJudgedAdvice(c *reports.Comparison) string {
	if len(c.Invalid) > 0 && len(c.Contended) == 0 {
		return "An invalid run is not whole: its figures cannot be trusted; rerun."
	}
	return "The machine, not the server, may explain any difference; rerun on a quiet machine."
}

// chartAnchor is the id of compare.html's chart that draws a row's figure ("" none).
func chartAnchor(figure string) string {
	switch {
	case strings.HasSuffix(figure, "(ttft)"):
		return "cmp_ttft"
	case strings.HasSuffix(figure, "(itl)"):
		return "cmp_itl"
	case strings.HasSuffix(figure, "(e2e)"):
		return "cmp_e2e"
	case strings.HasPrefix(figure, "rate ") || figure == "throughput" || figure == "requests" || figure == "silent drops":
		return "cmp_completed"
	}
	return ""
}

// regressionLink is one regression of compare.html's list with the chart it links to.
type regressionLink struct{ Text, Anchor string }

func regressionLinks(c *reports.Comparison) []regressionLink {
	anchors := map[string]string{}
	for _, r := range c.Rows {
		if r.Regression {
			anchors[r.Group+" "+r.Figure+":"] = chartAnchor(r.Figure)
		}
	}
	var out []regressionLink
	for _, text := range c.Regressions {
		l := regressionLink{Text: text}
		for prefix, a := range anchors {
			if strings.HasPrefix(text, prefix) {
				l.Anchor = a
			}
		}
		if strings.Contains(text, "silent drop") {
			l.Anchor = "cmp_completed"
		}
		out = append(out, l)
	}
	return out
}
