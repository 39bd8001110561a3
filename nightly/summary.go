package nightly

import (
	"fmt"
	"io"
	"strings"
)

// WriteSummary writes the night's markdown: the verdict, one table row per run (exit
// code, verdict, baselines and how many it regressed against), then each run's own
// summary.md (runSummary of its archive-relative directory; "" to leave it out).
func WriteSummary(w io.Writer, res *Result, runSummary func(dir string) string) {
	verdict := map[int]string{ExitPass: "PASS", ExitFail: "FAIL", ExitInfra: "INVALID"}[res.Code]
	fmt.Fprintf(w, "## Nightly soak %s: %s (exit %d)\n\n", res.Night, verdict, res.Code)
	fmt.Fprintln(w, "| scenario | exit | verdict | baseline nights | regressed against |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range res.Runs {
		v := r.Verdict
		if v == "" {
			v = "-"
		}
		if r.Error != "" {
			v += " (" + r.Error + ")"
		}
		nights := make([]string, len(r.Baselines))
		for i, b := range r.Baselines {
			nights[i] = b.Night
		}
		base := strings.Join(nights, ", ")
		if base == "" {
			base = "none yet"
		}
		against := fmt.Sprintf("%d of %d", countRegressed(r.Baselines), len(r.Baselines))
		if r.Regressed {
			against = "**" + against + ": REGRESSION**"
		}
		name := r.Scenario
		if r.Soak {
			name += " (soak)"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", name, r.Code, v, base, against)
	}
	if len(res.Pruned) > 0 {
		fmt.Fprintf(w, "\nPruned from the archive (retention): %s\n", strings.Join(res.Pruned, ", "))
	}
	for _, r := range res.Runs {
		for _, b := range r.Baselines {
			for _, reg := range b.Regressions {
				fmt.Fprintf(w, "\n- %s vs %s: %s", r.Scenario, b.Night, reg)
			}
		}
	}
	fmt.Fprintln(w)
	for _, r := range res.Runs {
		if s := runSummary(r.Dir); s != "" {
			fmt.Fprintf(w, "\n### %s\n\n%s\n", r.Scenario, strings.TrimSpace(s))
		}
	}
}
