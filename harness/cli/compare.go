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
	"pdsoak/reports/render"
	"pdsoak/scenarios"
)

// Exit codes of harness compare.
const (
	ExitNoRegression  = 0
	ExitRegression    = 1
	ExitNotComparable = 2
	// ExitInconclusive: a run's machine was too contended, or a run invalid, to judge
	// the server by.
	ExitInconclusive = 3
)

// loadedRun is one run's output directory, recomputed.
type loadedRun struct {
	dir      string
	run      *reports.Run
	digest   string
	identity reports.Identity
}

// loadRun recomputes a run's results and samples from its output directory, digests
// its scenario and reads what it ran against.
func loadRun(dir string) (loadedRun, error) {
	data, err := os.ReadFile(filepath.Join(dir, ResolvedFile))
	if err != nil {
		return loadedRun{}, usageError("%s is not a run's output directory: %v", dir, err)
	}
	var sc scenarios.Scenario
	if err := json.Unmarshal(data, &sc); err != nil {
		return loadedRun{}, usageError("%s: %v", filepath.Join(dir, ResolvedFile), err)
	}
	digest, err := reports.ScenarioDigest(data)
	if err != nil {
		return loadedRun{}, usageError("%s: %v", filepath.Join(dir, ResolvedFile), err)
	}
	run, err := reports.ComputeRun(filepath.Join(dir, ledger.EventsFile), judge.ReportConfig(&sc))
	if err != nil {
		return loadedRun{}, usageError("%s: %v", dir, err)
	}
	id, err := reports.IdentityOf(run.Results, data)
	if err != nil {
		return loadedRun{}, usageError("%s: %v", filepath.Join(dir, ResolvedFile), err)
	}
	return loadedRun{dir: dir, run: run, digest: digest, identity: id}, nil
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
	var tolerance, outDir, maxPressure string
	var force, ignoreContention bool
	var minLatency, maxTickLag, maxSendLag, maxRunDelay time.Duration
	cmd := &cobra.Command{
		Use:   "compare BASE [BASE...] NEW",
		Short: "Compare a run with one or more runs of the same scenario (output directories); exit 1 on a regression",
		Long: `compare recomputes the runs from their events.jsonl and compares every figure side by
side: outcome rates, throughput, TTFT/ITL/e2e p50/p90/p99, time to recover per fault, silent
drops, overall and per workload. It writes compare.md and compare.html into --out. Several
BASE runs (the last N good nights) are pooled into one baseline; each latency row then
shows the spread of their own percentiles.

Gates (noise-aware, calibrated: docs/COMPARE.md):
  latency   a percentile regresses only when the 95% bootstrap interval (2,000 seeded
            resamples; an agent's turns are resampled together, open-loop requests one
            by one, ITL by whole requests) of its relative change lies entirely above
            the metric's relative floor and it grew by at least its absolute floor
            (TTFT, ITL, e2e each have theirs; --tolerance and --min-latency-change
            replace them for every metric)
  outcomes  a bad outcome's rate (or ok's fall) regresses when a two-proportion z-test
            gives p < 0.01 and the rate moved by at least 1 percentage point
  drops     any silent drop in NEW where BASE had none
  verdict   BASE passed and NEW failed
  recovery  a fault that recovered in BASE did not in NEW

Contention: every real run records its machine's CPU pressure, steal and the harness's
own lag. When a run's contention exceeds a bound (--max-cpu-pressure, --max-tick-lag,
--max-send-lag) the answer is INCONCLUSIVE (exit 3), naming the run and by how much: a
busy runner is not a regression. --ignore-contention judges anyway. An invalid run
(interrupted, its target or the harness failed) is not whole: the answer is INCONCLUSIVE
too (exit 3), whatever --ignore-contention says.

Refusals: runs of different scenarios (digests), a simulated and a real run, or runs
against different backends, profiles, server versions or target.launch commands are not
comparable (exit 2, saying what differs); --force compares anyway and says so.

Exit codes: 0 no regression, 1 regression, 2 not comparable or bad usage, 3 inconclusive.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError("compare needs BASE and NEW (run output directories), got %s", plural(len(args), "argument", "arguments"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := reports.CompareOptions{}
			if cmd.Flags().Changed("tolerance") {
				tol, err := parseFraction(tolerance)
				if err != nil {
					return usageError("--tolerance: %v", err)
				}
				opts.Tolerance = tol
			}
			if cmd.Flags().Changed("min-latency-change") {
				if minLatency <= 0 {
					return usageError("--min-latency-change: must be positive, got %s", minLatency)
				}
				opts.MinLatencyChange = minLatency.Seconds()
			}
			for _, f := range []struct {
				name string
				v    time.Duration
			}{{"max-run-delay", maxRunDelay}, {"max-tick-lag", maxTickLag}, {"max-send-lag", maxSendLag}} {
				if f.v <= 0 {
					return usageError("--%s: must be positive, got %s", f.name, f.v)
				}
			}
			p, err := parseFraction(maxPressure)
			if err != nil || p > 1 {
				return usageError("--max-cpu-pressure: want a share such as 40%%, got %q", maxPressure)
			}
			opts.Contention = reports.ContentionBounds{CPUPressure: p, TickLag: maxTickLag.Seconds(), SendLag: maxSendLag.Seconds(), RunDelay: maxRunDelay.Seconds()}
			var runs []loadedRun
			for _, dir := range args {
				r, err := loadRun(dir)
				if err != nil {
					return err
				}
				runs = append(runs, r)
			}
			bases, nw := runs[:len(runs)-1], runs[len(runs)-1]
			newDir := args[len(args)-1]
			errOut := cmd.ErrOrStderr()
			var digestDiff bool
			var differences []string
			for _, b := range bases {
				if b.digest != nw.digest {
					digestDiff = true
					if !force {
						fmt.Fprintf(errOut, "harness: not comparable: %s ran scenario %s (digest %s), %s ran %s (digest %s); --force compares anyway\n",
							b.dir, b.run.Results.Scenario, b.digest, newDir, nw.run.Results.Scenario, nw.digest)
					}
				}
				if d := b.identity.Differences(nw.identity); len(d) > 0 {
					if len(bases) > 1 {
						for i := range d {
							d[i] = b.dir + ": " + d[i]
						}
					}
					differences = append(differences, d...)
				}
			}
			if len(differences) > 0 && !force {
				fmt.Fprintf(errOut, "harness: not comparable: BASE vs NEW: %s; --force compares anyway\n", strings.Join(differences, "; "))
			}
			if (digestDiff || len(differences) > 0) && !force {
				return &ExitError{Code: ExitNotComparable}
			}
			var c *reports.Comparison
			if len(bases) == 1 {
				c = reports.Compare(bases[0].run, nw.run, bases[0].digest, nw.digest, opts)
			} else {
				baseRuns := make([]*reports.Run, len(bases))
				for i, b := range bases {
					baseRuns[i] = b.run
				}
				if c, err = reports.CompareRuns(baseRuns, nw.run, nw.digest, opts); err != nil {
					return usageError("%v", err)
				}
				c.BaseDigest = bases[0].digest
			}
			c.Forced = digestDiff || len(differences) > 0
			c.Differences = differences
			ignored := ignoreContention && len(c.Contended) > 0
			if ignored {
				c.Contended = nil
			}
			if outDir == "" {
				outDir = filepath.Join(newDir, "compare-vs-"+filepath.Base(filepath.Clean(args[0])))
			}
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: %w", err)}
			}
			c.BaseReport, c.NewReport = reportLink(outDir, args[0]), reportLink(outDir, newDir)
			var md, page bytes.Buffer
			if err := render.WriteCompareMarkdown(&md, c); err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			if err := render.WriteCompareHTML(&page, c, bases[0].run.Results.Timeline(), nw.run.Results.Timeline()); err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			for name, data := range map[string][]byte{reports.CompareMarkdownFile: md.Bytes(), reports.CompareHTMLFile: page.Bytes()} {
				if err := os.WriteFile(filepath.Join(outDir, name), data, 0o644); err != nil {
					return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: %w", err)}
				}
			}
			out := cmd.OutOrStdout()
			if digestDiff {
				fmt.Fprintf(out, "harness: forced: the scenarios differ (digests %s and %s); compared anyway\n", bases[0].digest, nw.digest)
			}
			if len(differences) > 0 {
				fmt.Fprintf(out, "harness: forced: the runs' provenance differs (%s); compared anyway\n", strings.Join(differences, "; "))
			}
			if ignored {
				fmt.Fprintln(out, "harness: --ignore-contention: judged although a run was contended")
			}
			baseNames := make([]string, len(bases))
			for i, b := range bases {
				baseNames[i] = b.dir
			}
			fmt.Fprintf(out, "%s vs %s: %s\n", newDir, strings.Join(baseNames, " + "), c.VerdictText())
			if c.Inconclusive() {
				fmt.Fprintf(out, "  (BASE = %s, NEW = %s)\n", strings.Join(baseNames, ", "), newDir)
			}
			for _, r := range c.Regressions {
				fmt.Fprintln(out, "  -", r)
			}
			fmt.Fprintf(out, "wrote %s, %s\n", filepath.Join(outDir, reports.CompareMarkdownFile), filepath.Join(outDir, reports.CompareHTMLFile))
			if err := appendStepSummary(md.Bytes()); err != nil {
				fmt.Fprintln(errOut, "harness: warning:", err)
			}
			switch {
			case c.Inconclusive():
				return &ExitError{Code: ExitInconclusive}
			case c.Regressed():
				return &ExitError{Code: ExitRegression}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tolerance, "tolerance", "", "relative latency increase allowed for every metric (10% or 0.1; default: each metric's calibrated floor)")
	cmd.Flags().StringVar(&outDir, "out", "", "where to write compare.md and compare.html (default NEW/compare-vs-<first BASE's name>)")
	cmd.Flags().DurationVar(&minLatency, "min-latency-change", 0, "smallest latency increase that can be a regression, for every metric (default: each metric's calibrated floor)")
	cmd.Flags().BoolVar(&force, "force", false, "compare runs of different scenarios or provenance anyway (says so in the outputs)")
	cmd.Flags().StringVar(&maxPressure, "max-cpu-pressure", fmt.Sprintf("%g%%", 100*reports.DefaultBoundCPUPressure), "a run whose mean CPU pressure (share of time a task waited for a CPU) exceeds this is too contended to judge")
	cmd.Flags().DurationVar(&maxTickLag, "max-tick-lag", time.Duration(reports.DefaultBoundTickLag*float64(time.Second)), "a run whose harness tick lag p90 exceeds this is too contended to judge")
	cmd.Flags().DurationVar(&maxRunDelay, "max-run-delay", time.Duration(reports.DefaultBoundRunDelay*float64(time.Second)), "a run whose harness threads waited longer than this for a CPU per wake-up (mean) is too contended to judge")
	cmd.Flags().DurationVar(&maxSendLag, "max-send-lag", time.Duration(reports.DefaultBoundSendLag*float64(time.Second)), "a run whose send lag (p90 over its windows of each window's p99) exceeds this is too contended to judge")
	cmd.Flags().BoolVar(&ignoreContention, "ignore-contention", false, "judge even when a run was contended (says so)")
	return cmd
}

// reportLink is runDir's report.html relative to from, or "" when it does not exist.
func reportLink(from, runDir string) string {
	report := filepath.Join(runDir, reports.HTMLFile)
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
