package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdsoak/chaos"
	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
	"pdsoak/scenarios"
	"pdsoak/sim"
)

// scenarioFlags are the overrides run, plan and validate accept: each sets only the
// field it names.
type scenarioFlags struct {
	target     string
	metricsURL string
	duration   time.Duration
	seed       int64
	semantics  string
	// sim is run --sim: a target that cannot be simulated is refused like a bad flag.
	sim bool
	// headers are --header 'Name: value' (headers.go).
	headers headerFlag
}

func (f *scenarioFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.target, "target", "", "base URL of an OpenAI-compatible endpoint: sets target.url (no embedded server, no target.launch); the scenario's metrics_url and debug_url are kept")
	fs.StringVar(&f.metricsURL, "metrics-url", "", "Prometheus endpoint of an external target: sets target.metrics_url (enables no_leaks)")
	fs.DurationVar(&f.duration, "duration", 0, "override the scenario's load duration (e.g. 2m)")
	fs.Int64Var(&f.seed, "seed", 0, "override the scenario's seed")
	fs.StringVar(&f.semantics, "semantics", "", "override the embedded server's semantics: strict or sglang (e.g. to show a scenario fails under SGLang's PD behaviour)")
	registerHeaders(fs, &f.headers)
}

// load reads, overrides, defaults and validates a scenario. Overrides are applied before
// validation, so a combination that cannot run (no_leaks without any metrics URL) is
// refused like a bad file. The notes say what an override changed beyond its own field.
func (a *app) load(cmd *cobra.Command, arg string, f *scenarioFlags) (*scenarios.Scenario, []string, error) {
	var notes []string
	var flagErr error // a flag that cannot apply to the chosen target
	seedSet := cmd.Flags().Changed("seed")
	if f.duration < 0 {
		return nil, nil, usageError("--duration must be > 0")
	}
	override := func(sc *scenarios.Scenario) {
		if f.target != "" {
			// An external URL replaces launching: the launched processes would serve
			// another address.
			if n := len(sc.Target.Launch); n > 0 {
				notes = append(notes, fmt.Sprintf("--target replaces target.launch: the scenario's %s not started", plural(n, "launched process is", "launched processes are")))
			}
			sc.Target.URL = f.target
			sc.Target.Launch = nil
			sc.Target.Links = nil // the proxies were for the launched processes
		}
		if f.metricsURL != "" {
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
		if err := f.headers.apply(sc); err != nil && flagErr == nil {
			flagErr = err
		}
		// Flags that cannot apply to the chosen target are errors, never silently
		// ignored; said before the problems they may cause.
		switch {
		case f.semantics != "" && sc.Target.URL != "":
			flagErr = usageError("--semantics applies only to the embedded reference server; this run's target is the external %s (--target or target.url)", sc.Target.URL)
		case f.sim && sim.Refuse(sc) != nil:
			flagErr = usageError("--sim: %s", strings.TrimPrefix(sim.Refuse(sc).Error(), sim.ErrNotModelled.Error()+": "))
		case f.metricsURL != "" && sc.Target.URL == "":
			flagErr = usageError("--metrics-url applies only to an external target (--target or target.url); the embedded server's metrics are scraped without it")
		}
	}
	sc, err := scenarios.Load(arg, scenarios.WithFaultTypes(a.faultTypes), scenarios.WithOverrides(override), scenarios.WithReferenceCheck(referenceCheck))
	if flagErr != nil {
		return nil, nil, flagErr
	}
	if err != nil {
		return nil, nil, err
	}
	for _, w := range sc.DeadlineWarnings() {
		notes = append(notes, "warning: "+w)
	}
	return sc, notes, nil
}

// plural is "1 thing" or "2 things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func (a *app) validateCommand() *cobra.Command {
	var f scenarioFlags
	cmd := &cobra.Command{
		Use:   "validate SCENARIO",
		Short: "Check a scenario strictly, with the same overrides as run; print every problem with file, line and field",
		Args:  exactlyOne,
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, notes, err := a.load(cmd, args[0], &f)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: ok (scenario %s, %s, %s, %s)\n", sc.File, sc.Name,
				plural(len(sc.Workloads), "workload", "workloads"), plural(len(sc.Faults), "fault", "faults"),
				plural(len(sc.Assertions), "assertion", "assertions"))
			for _, n := range notes {
				fmt.Fprintln(out, "note:", n)
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	return cmd
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
			fmt.Fprintln(tw, "NAME\tEXPECTED\tUPSTREAM\tWHAT IT SHOWS")
			for _, i := range scenarios.List() {
				up := i.Upstream
				if up == "" {
					up = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", i.Name, i.Expected, up, i.Summary)
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
	var hist historyFlags
	var shard shardFlags
	var simulate, force bool
	var tel telemetryFlags
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario (a path or an embedded name) and write events.jsonl, results.json, junit.xml, summary.md, report.html",
		Args:  exactlyOne,
		RunE: func(cmd *cobra.Command, args []string) error {
			sh, err := shard.parse()
			if err != nil {
				return err
			}
			if simulate && sh.Count > 0 {
				return usageError("--shard cannot be used with --sim: a simulated run is one process on one virtual clock (it needs no sharding)")
			}
			f.sim = simulate
			sc, notes, err := a.load(cmd, args[0], &f)
			if err != nil {
				return err
			}
			a.sim = simulate
			if outDir == "" {
				outDir = filepath.Join("out", sc.Name+"-"+a.now().UTC().Format("20060102T150405Z"))
				if sh.Count > 0 {
					outDir += fmt.Sprintf("-shard%dof%d", sh.Index, sh.Count)
				}
			}
			if err := prepareOut(outDir, force); err != nil {
				return err
			}
			if sh.Count > 1 && sc.Embedded() {
				notes = append(notes, fmt.Sprintf("shard %d/%d starts its own embedded reference server: the shards load %d separate targets; give them one with --target or target.url", sh.Index, sh.Count, sh.Count))
			}
			a.shard = sh
			a.telemetry = tel
			return a.runScenario(cmd.Context(), sc, notes, outDir, quiet, &hist, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd.Flags())
	hist.register(cmd)
	shard.register(cmd.Flags())
	tel.register(cmd.Flags())
	cmd.Flags().StringVar(&outDir, "out", "", "output directory (default out/<name>-<UTC time>)")
	cmd.Flags().BoolVar(&force, "force", false, "empty --out first when it already holds a run (without it such a directory is refused)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress and no table: print the verdict line only")
	cmd.Flags().BoolVar(&simulate, "sim", false, "simulate: run the reference topology and the workloads in this process on a virtual clock (deterministic for a seed, far faster than real time); the same outputs, with \"mode\": \"sim\"; refused for an external target and with --shard")
	return cmd
}

func (a *app) runScenario(parent context.Context, sc *scenarios.Scenario, notes []string, outDir string, quiet bool, hist *historyFlags, stdout, stderr io.Writer) error {
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

	// A signal cancels the run; the runner records the cause in run_end and reports
	// makes the run invalid from it.
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hurry, stopHurry := secondSignal(ctx)
	defer stopHurry()

	if !quiet {
		against := judge.ReportConfig(sc).Target
		if a.sim {
			against = "a simulated " + against + " (virtual time)"
		}
		fmt.Fprintf(stdout, "harness: running %s (seed %d) against %s for %s; output in %s\n",
			sc.Name, sc.Seed, against, sc.Duration, outDir)
	}
	// Live telemetry follows the ledger and stays up until the reports are written.
	tel, err := a.telemetry.start(ctx, sc, a.shard, hist.runLabel(), logger, stdout, stderr, quiet)
	if err != nil {
		return err
	}
	defer tel.close()
	// Notes travel through the ledger (the runner emits them after run_start) and are
	// printed as their events go by, with the harness's own.
	var st *status
	var onEvent func(ledger.Event)
	if quiet {
		onEvent = notePrinter(stderr)
	} else {
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
	onEvent = tel.observe(onEvent)
	run := a.run
	if a.sim {
		run = a.simRun
	}
	runErr := run(ctx, sc, RunOptions{OutDir: outDir, Logger: logger, OnEvent: onEvent, PDServerCommand: a.pdCommand(), Notes: notes, Shard: a.shard, Hurry: hurry})
	stop()
	if st != nil {
		st.close()
	}

	// Outputs are written whatever happened, from the ledger alone, exactly as
	// `harness report` recomputes them.
	res, ledgerRead := computeResults(outDir, sc)
	if err := render.WriteAll(outDir, res); err != nil {
		if runErr != nil { // the cause comes first (a full disk stopped the ledger too)
			fmt.Fprintln(stderr, "harness: run failed:", reports.Readable(runErr.Error()))
		}
		return &ExitError{Code: ExitInfra, Err: err}
	}
	publish(outDir, res, hist, stderr)
	if !quiet {
		_ = render.WriteTable(stdout, res)
		fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join([]string{
			filepath.Join(outDir, ledger.EventsFile), filepath.Join(outDir, reports.ResultsFile),
			filepath.Join(outDir, reports.JUnitFile), filepath.Join(outDir, reports.SummaryFile), filepath.Join(outDir, reports.HTMLFile)}, ", "))
	} else {
		fmt.Fprintf(stdout, "%s (%s)\n", render.VerdictLine(res), outDir)
	}
	// The verdict says why a run is invalid, from run_end. A run error the ledger cannot
	// carry (the runner failed before writing it) must still be seen.
	if runErr != nil && (!ledgerRead || res.Verdict != reports.VerdictInvalid) {
		fmt.Fprintln(stderr, "harness: run failed:", reports.Readable(runErr.Error()))
	}

	switch {
	case runErr != nil && isScenarioError(runErr):
		return &ExitError{Code: ExitUsage}
	case runErr != nil, res.Verdict == reports.VerdictInvalid:
		return &ExitError{Code: ExitInfra}
	case res.Verdict == reports.VerdictFail:
		return &ExitError{Code: ExitFail}
	}
	return nil
}

// publish appends the run to --history and its summary to $GITHUB_STEP_SUMMARY. Neither
// changes the verdict: a failure is a warning on stderr.
func publish(outDir string, res *reports.Results, hist *historyFlags, stderr io.Writer) {
	if hist != nil {
		if err := hist.record(outDir, res); err != nil {
			fmt.Fprintln(stderr, "harness: warning:", reports.Readable(err.Error()))
		}
	}
	if os.Getenv(StepSummaryEnv) != "" {
		var md bytes.Buffer
		if err := render.WriteMarkdown(&md, res); err == nil {
			if err := appendStepSummary(md.Bytes()); err != nil {
				fmt.Fprintln(stderr, "harness: warning:", err)
			}
		}
	}
}

// notePrinter prints note events on w (for --quiet, where there is no status line).
func notePrinter(w io.Writer) func(ledger.Event) {
	var mu sync.Mutex
	return func(e ledger.Event) {
		if e.Type != ledger.EventNote {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, "harness: note:", e.Message)
	}
}
