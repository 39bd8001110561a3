package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

// Exit codes of harness compare.
const (
	ExitNoRegression  = 0
	ExitRegression    = 1
	ExitNotComparable = 2
)

// loadRun recomputes a run's results and samples from its output directory and digests
// its scenario.
func loadRun(dir string) (*reports.Run, string, error) {
	data, err := os.ReadFile(filepath.Join(dir, ResolvedFile))
	if err != nil {
		return nil, "", usageError("%s is not a run's output directory: %v", dir, err)
	}
	var sc scenarios.Scenario
	if err := json.Unmarshal(data, &sc); err != nil {
		return nil, "", usageError("%s: %v", filepath.Join(dir, ResolvedFile), err)
	}
	digest, err := reports.ScenarioDigest(data)
	if err != nil {
		return nil, "", usageError("%s: %v", filepath.Join(dir, ResolvedFile), err)
	}
	run, err := reports.ComputeRun(filepath.Join(dir, ledger.EventsFile), judge.ReportConfig(&sc))
	if err != nil {
		return nil, "", usageError("%s: %v", dir, err)
	}
	return run, digest, nil
}

// parseFraction reads "10%" or "0.1".
func parseFraction(s string) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("want a fraction such as 10%% or 0.1, got %q", s)
	}
	if pct {
		v /= 100
	}
	return v, nil
}

func (a *app) compareCommand() *cobra.Command {
	var tolerance, outDir string
	var force bool
	var minLatency time.Duration
	cmd := &cobra.Command{
		Use:   "compare BASE NEW",
		Short: "Compare two runs of the same scenario (output directories); exit 1 on a regression",
		Long: `compare recomputes both runs from their events.jsonl and compares every figure side by
side: outcome rates, throughput, TTFT/ITL/e2e p50/p90/p99, time to recover per fault, silent
drops, overall and per workload. It writes compare.md and compare.html into --out.

Gates (noise-aware):
  latency   a percentile regresses only when the 95% bootstrap interval (2,000 seeded
            resamples of the per-request samples; ITL resamples whole requests, as a
            request's gaps are correlated) of its relative change lies entirely
            above --tolerance and the percentile grew by at least --min-latency-change
            (default 5ms: below that, run-to-run differences are the machine's scheduling)
  outcomes  a bad outcome's rate (or ok's fall) regresses when a two-proportion z-test
            gives p < 0.01 and the rate moved by at least 1 percentage point
  drops     any silent drop in NEW where BASE had none
  verdict   BASE passed and NEW did not
  recovery  a fault that recovered in BASE did not in NEW

Exit codes: 0 no regression, 1 regression, 2 not comparable (the scenarios' digests differ;
--force compares anyway) or bad usage.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError("compare needs BASE and NEW (two run output directories), got %s", plural(len(args), "argument", "arguments"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			tol, err := parseFraction(tolerance)
			if err != nil {
				return usageError("--tolerance: %v", err)
			}
			base, bd, err := loadRun(args[0])
			if err != nil {
				return err
			}
			nw, nd, err := loadRun(args[1])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if bd != nd && !force {
				fmt.Fprintf(cmd.ErrOrStderr(), "harness: not comparable: %s ran scenario %s (digest %s), %s ran %s (digest %s); --force compares anyway\n",
					args[0], base.Results.Scenario, bd, args[1], nw.Results.Scenario, nd)
				return &ExitError{Code: ExitNotComparable}
			}
			c := reports.Compare(base, nw, bd, nd, reports.CompareOptions{Tolerance: tol, MinLatencyChange: minLatency.Seconds()})
			c.Forced = bd != nd
			if outDir == "" {
				outDir = filepath.Join(args[1], "compare-vs-"+filepath.Base(filepath.Clean(args[0])))
			}
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: %w", err)}
			}
			c.BaseReport, c.NewReport = reportLink(outDir, args[0]), reportLink(outDir, args[1])
			var md, page bytes.Buffer
			if err := reports.WriteCompareMarkdown(&md, c); err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			if err := reports.WriteCompareHTML(&page, c, base.Results.Timeline(), nw.Results.Timeline()); err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			for name, data := range map[string][]byte{reports.CompareMarkdownFile: md.Bytes(), reports.CompareHTMLFile: page.Bytes()} {
				if err := os.WriteFile(filepath.Join(outDir, name), data, 0o644); err != nil {
					return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: %w", err)}
				}
			}
			if c.Forced {
				fmt.Fprintf(out, "harness: forced: the scenarios differ (digests %s and %s); compared anyway\n", bd, nd)
			}
			fmt.Fprintf(out, "%s vs %s: %s\n", args[1], args[0], c.VerdictText())
			for _, r := range c.Regressions {
				fmt.Fprintln(out, "  -", r)
			}
			fmt.Fprintf(out, "wrote %s, %s\n", filepath.Join(outDir, reports.CompareMarkdownFile), filepath.Join(outDir, reports.CompareHTMLFile))
			if err := appendStepSummary(md.Bytes()); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "harness: warning:", err)
			}
			if c.Regressed() {
				return &ExitError{Code: ExitRegression}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tolerance, "tolerance", "10%", "relative latency increase allowed before the bootstrap gate can flag it (10% or 0.1)")
	cmd.Flags().StringVar(&outDir, "out", "", "where to write compare.md and compare.html (default NEW/compare-vs-<BASE's name>)")
	cmd.Flags().DurationVar(&minLatency, "min-latency-change", time.Duration(reports.DefaultMinLatencyChange*float64(time.Second)), "smallest latency increase that can be a regression")
	cmd.Flags().BoolVar(&force, "force", false, "compare runs of different scenarios anyway (says so in the outputs)")
	return cmd
}

// reportLink is runDir's report.html relative to from, or "" when it does not exist.
func reportLink(from, runDir string) string {
	report := filepath.Join(runDir, reports.HTMLReportFile)
	if _, err := os.Stat(report); err != nil {
		return ""
	}
	rel, err := relTo(from, report)
	if err != nil {
		return ""
	}
	return filepath.ToSlash(rel)
}

// StepSummaryEnv names the file GitHub Actions shows as the job's summary.
const StepSummaryEnv = "GITHUB_STEP_SUMMARY"

// appendStepSummary appends markdown to $GITHUB_STEP_SUMMARY when it is set, in one write.
func appendStepSummary(md []byte) error {
	path := os.Getenv(StepSummaryEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("harness: %s: %w", StepSummaryEnv, err)
	}
	data := append(append([]byte(nil), md...), '\n')
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("harness: %s: %w", StepSummaryEnv, werr)
	}
	return nil
}
