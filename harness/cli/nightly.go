package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"pdsoak/harness/judge"
	"pdsoak/internal/freeport"
	"pdsoak/nightly"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

// referencePorts are the launch packs' port variables; --reference gives each one that
// is unset a free port, so that a laptop night never collides with anything listening.
var referencePorts = []string{"ROUTER_PORT", "PREFILL_PORT", "DECODE_PORT", "BOOTSTRAP_PORT", "ROUTER_METRICS_PORT"}

func (a *app) nightlyCommand() *cobra.Command {
	var (
		archive, sha, tolerance string
		soaks                   []string
		duration, soakDuration  time.Duration
		baselineNights, keep    int
		reference, dryRun       bool
	)
	cmd := &cobra.Command{
		Use:   "nightly [flags] SCENARIO... [--soak SCENARIO]...",
		Short: "Run one night of the nightly soak: the scenarios, compare against the last good nights, archive, trend; exit 0 pass, 1 fail or regression, 3 invalid or inconclusive",
		Long: `nightly runs one night into an archive that keeps every night:

  ARCHIVE/nights/<date>-<sha>/<scenario>/   each run's outputs (report.html, ...), and
      compare/ against its baseline nights pooled into one (the last --baseline-nights
      nights whose run of the same scenario, unchanged, passed; a night whose run was
      made against something else, such as another backend or server version, or on a
      contended machine, is listed as refused and not pooled)
  ARCHIVE/nights/<date>-<sha>/night.json    the night's manifest; summary.md its summary
  ARCHIVE/history.jsonl                     one line per run, pointing at its night
  ARCHIVE/index.html                        the trend page: each row links its own night

Publish ARCHIVE whole (it keeps the newest --keep nights). Every scenario loads before
anything runs; SCENARIOs run for --duration (default: their own), --soak ones for
--soak-duration. A run regresses when it regressed against the pooled baseline (exit
1); when a run was contended the comparison is inconclusive, not a regression (exit 3,
as compare's). The night's summary is appended to $GITHUB_STEP_SUMMARY when set.

--reference runs the SGLang launch packs against the reference server (this binary's
pdserver sglang-server / sglang-router, MODEL_PATH=ref, free ports, and agent
conversations small enough for its tiny model: TURNS=4 PROMPT_TOKENS=32
TOOL_RESULT_BYTES=64 MAX_TOKENS=16), each where the environment does not set it: the GPU
night on a laptop.

Exit codes: 0 every run passed and none regressed; 1 a run failed or regressed; 2 bad
usage or a scenario that does not load (nothing ran); 3 a run was invalid.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(soaks) == 0 {
				return usageError("nightly needs at least one SCENARIO or --soak SCENARIO")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if duration < 0 || soakDuration < 0 {
				return usageError("--duration and --soak-duration must be > 0")
			}
			var tol float64 // zero: each metric's calibrated floor (reports.DefaultFloors)
			if tolerance != "" {
				t, err := parseFraction(tolerance)
				if err != nil {
					return usageError("--tolerance: %v", err)
				}
				tol = t
			}
			if baselineNights < 1 {
				return usageError("--baseline-nights must be at least 1, got %d", baselineNights)
			}
			lookup := os.LookupEnv
			if reference {
				var err error
				lookup, err = a.referenceEnv()
				if err != nil {
					return &ExitError{Code: ExitInfra, Err: err}
				}
			}
			load := func(s string, d time.Duration) (*scenarios.Scenario, error) {
				return scenarios.Load(s, scenarios.WithEnv(lookup), scenarios.WithFaultTypes(a.faultTypes), scenarios.WithReferenceCheck(referenceCheck), scenarios.WithOverrides(func(sc *scenarios.Scenario) {
					if d > 0 {
						sc.Duration = scenarios.Duration(d)
					}
				}))
			}
			var specs []nightly.Spec
			for _, s := range args {
				specs = append(specs, nightly.Spec{Scenario: s, Duration: duration})
			}
			for _, s := range soaks {
				specs = append(specs, nightly.Spec{Scenario: s, Duration: soakDuration, Soak: true})
			}
			out := cmd.OutOrStdout()
			if dryRun {
				return dryRunNight(cmd, specs, load)
			}
			run := func(ctx context.Context, r nightly.RunRequest) (int, error) {
				sc, err := load(r.Scenario, r.Duration)
				if err != nil {
					return ExitUsage, err
				}
				return exitCode(a.runScenario(ctx, sc, nil, r.OutDir, true, &historyFlags{file: r.History, label: r.Label}, out, cmd.ErrOrStderr())), nil
			}
			// The night writes one step summary holding each run's; the runs must not
			// append theirs as well.
			step, stepSet := os.LookupEnv(StepSummaryEnv)
			if stepSet {
				os.Unsetenv(StepSummaryEnv)
				defer os.Setenv(StepSummaryEnv, step)
			}
			// A signal ends the run in progress (its own handler) and the night: the runs
			// left are recorded as not run, and the archive is still written.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := nightly.Run(ctx, nightly.Config{Archive: archive, SHA: sha, Specs: specs}, run, judge.ReportConfig,
				nightly.WithClock(a.now), nightly.WithPreflight(load), nightly.WithBaselineNights(baselineNights), nightly.WithKeep(keep),
				nightly.WithCompareOptions(reports.CompareOptions{Tolerance: tol}), nightly.WithStepSummary(step),
				nightly.WithOutput(out),
				// What the night could not do (a baseline it could not read, compare/ it could
				// not write, a night it could not prune) is said on stderr; without a logger
				// it went nowhere.
				nightly.WithLogger(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))))
			switch {
			case errors.Is(err, nightly.ErrUsage):
				return &ExitError{Code: ExitUsage, Err: err}
			case err != nil:
				return &ExitError{Code: ExitInfra, Err: err}
			case res.Code != 0:
				return &ExitError{Code: res.Code}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&archive, "archive", "nightly", "the archive: nights/, history.jsonl, index.html (created when absent; publish it whole)")
	fs.StringVar(&sha, "sha", os.Getenv("GITHUB_SHA"), "the commit under test: names the night (<date>-<first 7>) and labels its history lines")
	fs.StringArrayVar(&soaks, "soak", nil, "a scenario run for --soak-duration (repeatable): the night's long soak")
	fs.DurationVar(&duration, "duration", 0, "override the SCENARIOs' load duration")
	fs.DurationVar(&soakDuration, "soak-duration", 0, "override the --soak scenarios' load duration (e.g. 3h)")
	fs.IntVar(&baselineNights, "baseline-nights", nightly.DefaultBaselineNights, "compare each run against this many of the last good nights")
	fs.IntVar(&keep, "keep", nightly.DefaultKeep, "nights the archive keeps (older ones are deleted; their history lines stay); 0 keeps all")
	fs.StringVar(&tolerance, "tolerance", "", "relative latency increase allowed for every metric (10% or 0.1; default: each metric's calibrated floor, as compare)")
	fs.BoolVar(&reference, "reference", false, "run the SGLang packs against the reference server (no GPU, no Python): SGLANG_SERVER, SGLANG_ROUTER, MODEL_PATH=ref, free ports and a small agent workload (TURNS=4 PROMPT_TOKENS=32 TOOL_RESULT_BYTES=64 MAX_TOKENS=16), where unset")
	fs.BoolVar(&dryRun, "dry-run", false, "load every scenario and print what the night would run; run nothing")
	return cmd
}

// referenceEnv is the environment of a --reference night: the process's own, with the
// SGLang launchers pointed at this binary's pdserver, MODEL_PATH=ref and a free port for
// every unset port variable. A variable set in the environment wins.
func (a *app) referenceEnv() (scenarios.LookupEnv, error) {
	pd := a.pdCommand()
	if len(pd) == 0 {
		return nil, errors.New("harness: nightly --reference: cannot find this executable")
	}
	quoted := make([]string, len(pd))
	for i, p := range pd {
		if strings.ContainsAny(p, " \t'\"\\") {
			p = "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
		}
		quoted[i] = p
	}
	self := strings.Join(quoted, " ")
	extra := map[string]string{
		"SGLANG_SERVER": self + " sglang-server",
		"SGLANG_ROUTER": self + " sglang-router",
		"MODEL_PATH":    "ref",
		// The packs' agent workload is sized for a GPU model; on the reference server's
		// tinyref, conversations that grow by 2 KiB tool results every turn overflow
		// its context and pool (409s and 503s: success below the recovery threshold,
		// measured on a 2-minute sglang-pd night), so --reference keeps them small.
		"TURNS": "4", "PROMPT_TOKENS": "32", "TOOL_RESULT_BYTES": "64", "MAX_TOKENS": "16",
	}
	var missing []string
	for _, name := range referencePorts {
		if _, ok := os.LookupEnv(name); !ok {
			missing = append(missing, name)
		}
	}
	ports, err := freeport.Loopback(len(missing)) // distinct, below the ephemeral range
	if err != nil {
		return nil, fmt.Errorf("harness: nightly --reference: %w", err)
	}
	for i, name := range missing {
		extra[name] = strconv.Itoa(ports[i])
	}
	return func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		v, ok := extra[k]
		return v, ok
	}, nil
}

// dryRunNight loads every spec and prints what would run.
func dryRunNight(cmd *cobra.Command, specs []nightly.Spec, load nightly.LoadFunc) error {
	out := cmd.OutOrStdout()
	var errs []error
	for _, s := range specs {
		sc, err := load(s.Scenario, s.Duration)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		kind := "run"
		if s.Soak {
			kind = "soak"
		}
		plan := scenarios.Plan(sc)
		fmt.Fprintf(out, "%s %s (%s): %s against %s, %s\n", kind, sc.Name, s.Scenario, sc.Duration, plan.Target, plural(len(plan.Faults), "fault injection", "fault injections"))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}
