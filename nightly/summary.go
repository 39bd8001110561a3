package nightly

import (
	"fmt"
	"io"
	"strings"
)

// WriteSummary writes the night's markdown: the verdict, one table row per run (exit
// code, verdict, baseline nights and the pooled comparison's state), the regressions,
// the inconclusive comparisons and the refused baselines, then each run's own
// summary.md (runSummary of its archive-relative directory; "" to leave it out).
func WriteSummary(w io.Writer, res *Result, runSummary func(dir string) string) {
	verdict := map[int]string{ExitPass: "PASS", ExitFail: "FAIL", ExitInfra: "INVALID"}[res.Code]
	if res.Code == ExitInfra && !anyInvalid(res.Runs) {
		verdict = "INCONCLUSIVE"
	}
	fmt.Fprintf(w, "## Nightly soak %s: %s (exit %d)\n\n", res.Night, verdict, res.Code)
	fmt.Fprintln(w, "| scenario | exit | verdict | baseline nights | comparison |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range res.Runs {
		v := r.Verdict
		if v == "" {
			v = "-"
		}
		if r.Error != "" {
			v += " (" + r.Error + ")"
		}
		var nights []string
		for _, b := range r.Baselines {
			if len(b.Refused) > 0 {
				nights = append(nights, b.Night+" (refused)")
			} else {
				nights = append(nights, b.Night)
			}
		}
		base := strings.Join(nights, ", ")
		if base == "" {
			base = "none yet"
		}
		state := "-"
		switch r.Comparison {
		case CompareOK:
			state = fmt.Sprintf("no regression (%d pooled)", len(pooled(r.Baselines)))
		case CompareRegressed:
			state = fmt.Sprintf("**REGRESSION** (%d pooled)", len(pooled(r.Baselines)))
		case CompareInconclusive:
			state = "**INCONCLUSIVE** (contended)"
			if len(r.Contended) == 0 {
				state = "**INCONCLUSIVE** (invalid run)"
			}
		}
		name := r.Scenario
		if r.Soak {
			name += " (soak)"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", name, r.Code, v, base, state)
	}
	if len(res.Pruned) > 0 {
		fmt.Fprintf(w, "\nPruned from the archive (retention): %s\n", strings.Join(res.Pruned, ", "))
	}
	for _, r := range res.Runs {
		if r.Comparison == CompareRegressed {
			for _, reg := range r.Regressions {
				fmt.Fprintf(w, "\n- %s vs %d pooled nights: %s", r.Scenario, len(pooled(r.Baselines)), reg)
			}
		}
		if r.Comparison == CompareInconclusive {
			advice := "rerun on a quiet machine"
			if len(r.Contended) == 0 {
				advice = "an invalid run is not whole; rerun"
			}
			fmt.Fprintf(w, "\n- %s: inconclusive, not judged: %s; %s", r.Scenario, strings.Join(append(append([]string(nil), r.Invalid...), r.Contended...), "; "), advice)
		}
		for _, b := range r.Baselines {
			if len(b.Refused) > 0 {
				fmt.Fprintf(w, "\n- %s: baseline %s refused (not pooled): %s", r.Scenario, b.Night, strings.Join(b.Refused, "; "))
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

// anyInvalid reports whether a run itself was invalid (not 0 or 1).
func anyInvalid(runs []RunResult) bool {
	for _, r := range runs {
		if r.Code != ExitPass && r.Code != ExitFail {
			return true
		}
	}
	return false
}
