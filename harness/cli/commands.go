package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdsoak/chaos"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

// scenarioFlags are the overrides run and plan accept.
type scenarioFlags struct {
	target     string
	metricsURL string
	duration   time.Duration
	seed       int64
	semantics  string
}

func (f *scenarioFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.target, "target", "", "base URL of an OpenAI-compatible endpoint; overrides the scenario's target (no embedded server)")
	fs.StringVar(&f.metricsURL, "metrics-url", "", "Prometheus endpoint of the --target (enables no_leaks)")
	fs.DurationVar(&f.duration, "duration", 0, "override the scenario's load duration (e.g. 2m)")
	fs.Int64Var(&f.seed, "seed", 0, "override the scenario's seed")
	fs.StringVar(&f.semantics, "semantics", "", "override the embedded server's semantics: strict or sglang (e.g. to show a scenario fails under SGLang's PD behaviour)")
}

// load reads, overrides, defaults and validates a scenario.
func (a *app) load(cmd *cobra.Command, arg string, f *scenarioFlags) (*scenarios.Scenario, []string, error) {
	var notes []string
	seedSet := cmd.Flags().Changed("seed")
	if f.duration < 0 {
		return nil, nil, usageError("--duration must be > 0")
	}
	override := func(sc *scenarios.Scenario) {
		if f.target != "" {
			sc.Target.URL = f.target
			sc.Target.Launch = nil
			sc.Target.MetricsURL = f.metricsURL
			sc.Target.DebugURL = ""
			if f.metricsURL == "" {
				// An external endpoint has no known metrics: a leak check cannot run.
				kept := sc.Assertions[:0:0]
				for _, as := range sc.Assertions {
					if strings.TrimSpace(as) == reports.AssertNoLeaks {
						notes = append(notes, "no_leaks skipped: --target has no --metrics-url")
						continue
					}
					kept = append(kept, as)
				}
				if sc.Assertions != nil {
					sc.Assertions = kept
				}
			}
		} else if f.metricsURL != "" {
			sc.Target.MetricsURL = f.metricsURL
		}
		if f.duration > 0 {
			sc.Duration = scenarios.Duration(f.duration)
		}
		if seedSet {
			sc.Seed = f.seed
		}
		if f.semantics != "" {
			sc.Reference.Semantics = f.semantics
		}
	}
	sc, err := scenarios.Load(arg, scenarios.WithFaultTypes(a.faultTypes), scenarios.WithOverrides(override))
	return sc, notes, err
}

func (a *app) validateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate SCENARIO",
		Short: "Check a scenario strictly; print every problem with file, line and field",
		Args:  exactlyOne,
		RunE: func(cmd *cobra.Command, args []string) error {
			var f scenarioFlags
			sc, _, err := a.load(cmd, args[0], &f)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (scenario %s, %d workloads, %d faults, %d assertions)\n",
				sc.File, sc.Name, len(sc.Workloads), len(sc.Faults), len(sc.Assertions))
			return nil
		},
	}
}

func (a *app) planCommand() *cobra.Command {
	var f scenarioFlags
	cmd := &cobra.Command{
		Use:   "plan SCENARIO",
		Short: "Print the timeline (workloads and faults) without running anything",
		Args:  exactlyOne,
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, notes, err := a.load(cmd, args[0], &f)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if err := scenarios.Plan(sc).Write(out); err != nil {
				return err
			}
			fmt.Fprintf(out, "\nassertions: %s\n", strings.Join(sc.Assertions, ", "))
			for _, n := range notes {
				fmt.Fprintln(out, "note:", n)
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	return cmd
}

func (a *app) listCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the embedded scenarios",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tEXPECTED\tWHAT IT SHOWS")
			for _, i := range scenarios.List() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", i.Name, i.Expected, i.Summary)
			}
			return tw.Flush()
		},
	}
}

func (a *app) faultsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "faults",
		Short: "List the fault types scenarios can use",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TYPE\tTARGETS\tWHAT IT DOES")
			for _, t := range chaos.Types() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Targets, t.Doc)
				for _, p := range t.Params {
					fmt.Fprintf(tw, "\t\t  params.%s\n", p)
				}
			}
			return tw.Flush()
		},
	}
}

func (a *app) runCommand() *cobra.Command {
	var f scenarioFlags
	var outDir string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario (a path or an embedded name) and write events.jsonl, results.json, junit.xml, summary.md",
		Args:  exactlyOne,
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, notes, err := a.load(cmd, args[0], &f)
			if err != nil {
				return err
			}
			if outDir == "" {
				outDir = filepath.Join("out", sc.Name+"-"+a.now().UTC().Format("20060102T150405Z"))
			}
			return a.runScenario(cmd.Context(), sc, notes, outDir, quiet, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&outDir, "out", "", "output directory (default out/<name>-<UTC time>)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress and no table: print the verdict line only")
	return cmd
}

// reportConfig is how the scenario's assertions are judged.
func reportConfig(sc *scenarios.Scenario) reports.Config {
	target := sc.Target.URL
	if target == "" {
		target = scenarios.Plan(sc).Target
	}
	return reports.Config{
		Scenario:   sc.Name,
		Seed:       sc.Seed,
		Target:     target,
		Assertions: sc.Assertions,
		Recovery: reports.RecoveryConfig{
			Window:    sc.Recovery.Window.D(),
			Within:    sc.Recovery.Within.D(),
			Threshold: sc.Recovery.Threshold,
		},
	}
}

func (a *app) runScenario(parent context.Context, sc *scenarios.Scenario, notes []string, outDir string, quiet bool, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: create output directory: %w", err)}
	}
	logFile, err := os.Create(filepath.Join(outDir, "harness.log"))
	if err != nil {
		return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: create log: %w", err)}
	}
	defer logFile.Close()
	logger := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := writeResolved(outDir, sc); err != nil {
		return &ExitError{Code: ExitInfra, Err: err}
	}

	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if !quiet {
		fmt.Fprintf(stdout, "harness: running %s (seed %d) against %s for %s; output in %s\n",
			sc.Name, sc.Seed, reportConfig(sc).Target, sc.Duration, outDir)
		for _, n := range notes {
			fmt.Fprintln(stdout, "harness: note:", n)
		}
	}
	var st *status
	onEvent := func(ledger.Event) {}
	if !quiet {
		tty := isTerminal(stdout)
		every := a.statusEvery
		if every == 0 {
			every = 10 * time.Second
			if tty {
				every = 500 * time.Millisecond
			}
		}
		st = newStatus(stdout, tty, every)
		onEvent = st.observe
		go st.run()
	}
	runErr := a.run(ctx, sc, RunOptions{OutDir: outDir, Logger: logger, OnEvent: onEvent, PDServerCommand: a.pdCommand()})
	interrupted := ctx.Err() != nil && parent.Err() == nil
	stop()
	if st != nil {
		st.close()
	}

	// Outputs are written whatever happened, from the ledger.
	res := computeResults(outDir, sc)
	res.Notes = append(res.Notes, notes...)
	if runErr != nil {
		res.InvalidReasons = append(res.InvalidReasons, "run: "+runErr.Error())
	}
	if interrupted {
		res.InvalidReasons = append(res.InvalidReasons, "interrupted by a signal before the run completed")
	}
	if len(res.InvalidReasons) > 0 {
		res.Verdict = reports.VerdictInvalid
	}
	if err := reports.WriteAll(outDir, res); err != nil {
		return &ExitError{Code: ExitInfra, Err: err}
	}
	if !quiet {
		_ = reports.WriteTable(stdout, res)
		fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join([]string{
			filepath.Join(outDir, ledger.EventsFile), filepath.Join(outDir, reports.ResultsFile),
			filepath.Join(outDir, reports.JUnitFile), filepath.Join(outDir, reports.SummaryFile)}, ", "))
	} else {
		fmt.Fprintf(stdout, "%s %s: %d requests, %d silent drops (%s)\n",
			strings.ToUpper(string(res.Verdict)), sc.Name, res.Requests, res.SilentDrops, outDir)
	}

	switch {
	case runErr != nil && isScenarioError(runErr):
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("harness: %w", runErr)}
	case runErr != nil:
		return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: run failed: %w", runErr)}
	case res.Verdict == reports.VerdictInvalid:
		return &ExitError{Code: ExitInfra, Err: errors.New("harness: invalid run: " + strings.Join(res.InvalidReasons, "; "))}
	case res.Verdict == reports.VerdictFail:
		return &ExitError{Code: ExitFail}
	}
	return nil
}
