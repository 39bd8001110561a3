package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
	"pdsoak/scenarios"
)

// ResolvedFile is the scenario as run (overrides and defaults applied), written next to
// events.jsonl so that `harness report` can recompute the results from the ledger alone.
const ResolvedFile = "scenario.json"

func writeResolved(dir string, sc *scenarios.Scenario) error {
	data, err := json.MarshalIndent(sc, "", "  ")
	if err != nil {
		return fmt.Errorf("harness: encode resolved scenario: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ResolvedFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("harness: write resolved scenario: %w", err)
	}
	return nil
}

// computeResults judges dir/events.jsonl; a missing or unreadable ledger is an invalid
// run (read reports false).
func computeResults(dir string, sc *scenarios.Scenario) (res *reports.Results, read bool) {
	cfg := judge.ReportConfig(sc)
	res, err := reports.ComputeFile(filepath.Join(dir, ledger.EventsFile), cfg)
	if err != nil {
		res = reports.Compute(nil, cfg)
		// The one reason: the others (no requests, nothing evaluated) follow from it.
		res.InvalidReasons = []string{"no readable ledger: " + reports.Readable(err.Error())}
		res.Verdict = reports.VerdictInvalid
		return res, false
	}
	return res, true
}

func (a *app) reportCommand() *cobra.Command {
	var quiet bool
	var hist historyFlags
	cmd := &cobra.Command{
		Use:   "report OUTDIR",
		Short: "Recompute results.json, junit.xml, summary.md and report.html from a run's events.jsonl",
		Long: `report recomputes a run's results from its ledger (events.jsonl) and the scenario as
it was run (scenario.json), rewrites results.json, junit.xml, summary.md and report.html, prints the
summary table and exits with the verdict's code (0 pass, 1 fail, 3 invalid).`,
		Args: exactlyOne,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			data, err := os.ReadFile(filepath.Join(dir, ResolvedFile))
			if err != nil {
				return usageError("%s is not a run's output directory: %v", dir, err)
			}
			var sc scenarios.Scenario
			if err := json.Unmarshal(data, &sc); err != nil {
				return usageError("%s: %v", filepath.Join(dir, ResolvedFile), err)
			}
			res, _ := computeResults(dir, &sc)
			if err := render.WriteAll(dir, res); err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			if err := hist.record(dir, res); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "harness: warning:", reports.Readable(err.Error()))
			}
			if !quiet {
				_ = render.WriteTable(cmd.OutOrStdout(), res)
			}
			if quiet {
				fmt.Fprintln(cmd.OutOrStdout(), render.VerdictLine(res))
			}
			switch res.Verdict {
			case reports.VerdictPass:
				return nil
			case reports.VerdictFail:
				return &ExitError{Code: ExitFail}
			}
			// The verdict printed above says why.
			return &ExitError{Code: ExitInfra}
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no table: print the verdict line only")
	hist.register(cmd)
	return cmd
}
