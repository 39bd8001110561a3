package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdsoak/explore"
	"pdsoak/harness/judge"
	"pdsoak/scenarios"
	"pdsoak/sim"
)

// defaultExploreRun is the simulator `harness explore` runs every scenario on: the one
// place that wires explore to package sim.
var defaultExploreRun explore.RunFunc = func(ctx context.Context, sc *scenarios.Scenario, outDir string) error {
	return sim.Run(ctx, sc, sim.Options{OutDir: outDir})
}

// defaultExploreFaultFilter leaves out of `explore.faults: catalogue` the faults the
// simulated topology cannot model (a target kind does not say which role a fault
// needs). Client-side faults are the simulated harness's own and always pass.
var defaultExploreFaultFilter explore.FaultFilter = func(sc *scenarios.Scenario, f scenarios.Fault) error {
	if sim.IsClientSide(f) {
		return nil
	}
	srv, err := sim.NewTopology(sim.NewLoop(sim.Epoch), sc)
	if err != nil {
		return err
	}
	return srv.CanModel(f)
}

// WithExploreRunner replaces the simulator that explore runs scenarios on (tests).
func WithExploreRunner(r explore.RunFunc) Option { return func(a *app) { a.exploreRun = r } }

type exploreFlags struct {
	runs          int
	budget        time.Duration
	parallel      int
	seed          int64
	outDir        string
	noShrink      bool
	maxShrinkRuns int
	semantics     string
	duration      time.Duration
	quiet         bool
	headers       headerFlag
}

func (f *exploreFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.runs, "runs", 0, fmt.Sprintf("number of runs (default %d when --time is not given)", explore.DefaultRuns))
	fs.DurationVar(&f.budget, "time", 0, "stop handing out runs after this long (e.g. 2m); with --runs, whichever comes first")
	fs.IntVar(&f.parallel, "parallel", 0, "runs at once (default GOMAXPROCS)")
	fs.Int64Var(&f.seed, "seed", 1, "explore seed: run i's parameters depend only on it and i")
	fs.StringVar(&f.outDir, "out", "", "output directory (default out/explore-<name>-<UTC time>)")
	fs.BoolVar(&f.noShrink, "no-shrink", false, "report failures without shrinking them")
	fs.IntVar(&f.maxShrinkRuns, "max-shrink-runs", explore.DefaultMaxShrinkRuns, "runs spent shrinking one failure at most")
	fs.StringVar(&f.semantics, "semantics", "", "override the reference server's semantics: strict or sglang")
	fs.DurationVar(&f.duration, "duration", 0, "override the scenario's load duration (e.g. 40s)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines")
	registerHeaders(fs, &f.headers)
}

func (a *app) exploreCommand() *cobra.Command {
	var f exploreFlags
	cmd := &cobra.Command{
		Use:   "explore SCENARIO",
		Short: "Search a scenario's explore: space under simulation for liveness failures, and shrink each to a replayable scenario file",
		Long: `explore runs a scenario many times under simulation, each run with its own seed and,
within the ranges of the scenario's explore: section, its own load, server flags and fault
schedule. Run i's parameters depend only on --seed and i, so the runs are the same whatever
--parallel is. Each failing run has a signature: its failed assertions and the stages where
the server held its silent drops (no_silent_drops@decode:prealloc). The first run of each
signature is shrunk — fewer faults, shorter windows, fewer agents and turns, flags moved
toward the scenario's own values — and written as shrunk-<signature>.yaml with its exact
seed: harness run --sim replays it, harness run runs it on the real reference server.

Writes explore.json (coverage: runs, signatures with counts and first runs, time),
shrunk-*.yaml with each one's run, and runs/run-N (the first failing run of each signature).

Exit codes: 0 no failure found, 1 a failure was found, 2 bad scenario or usage (an external
target cannot be explored), 3 the search could not run (no simulator, infrastructure,
interrupted).`,
		Args: exactlyOne,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.explore(cmd, args[0], &f)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

func (a *app) explore(cmd *cobra.Command, arg string, f *exploreFlags) error {
	switch {
	case f.runs < 0:
		return usageError("--runs must be ≥ 0, got %d", f.runs)
	case f.budget < 0:
		return usageError("--time must be ≥ 0, got %s", f.budget)
	case f.parallel < 0:
		return usageError("--parallel must be ≥ 0, got %d", f.parallel)
	case f.maxShrinkRuns < 1:
		return usageError("--max-shrink-runs must be ≥ 1, got %d", f.maxShrinkRuns)
	case f.duration < 0:
		return usageError("--duration must be > 0")
	}
	var headerErr error
	sc, err := scenarios.Load(arg, scenarios.WithFaultTypes(a.faultTypes), scenarios.WithReferenceCheck(referenceCheck), scenarios.WithOverrides(func(sc *scenarios.Scenario) {
		if f.semantics != "" {
			sc.Reference.Semantics = f.semantics
		}
		if f.duration > 0 {
			sc.Duration = scenarios.Duration(f.duration)
		}
		headerErr = f.headers.apply(sc)
	}))
	if headerErr != nil {
		return headerErr
	}
	if err != nil {
		return err
	}
	if err := explore.Check(sc); err != nil {
		return err
	}
	run := a.exploreRun
	if run == nil {
		run = defaultExploreRun
	}
	outDir := f.outDir
	if outDir == "" {
		outDir = filepath.Join("out", "explore-"+sc.Name+"-"+a.now().UTC().Format("20060102T150405Z"))
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	opts := explore.Options{
		Run: run, Runs: f.runs, Time: f.budget, Parallel: f.parallel, Seed: f.seed, OutDir: outDir,
		NoShrink: f.noShrink, MaxShrinkRuns: f.maxShrinkRuns, FaultTypes: a.faultTypes, FaultFilter: defaultExploreFaultFilter,
		ReportConfig: judge.ReportConfig, Command: exploreCommandLine(cmd, arg),
	}
	if !f.quiet {
		opts.Progress = stderr
		budget := fmt.Sprintf("%d runs", explore.DefaultRuns)
		switch {
		case f.runs > 0 && f.budget > 0:
			budget = fmt.Sprintf("%d runs or %s", f.runs, f.budget)
		case f.runs > 0:
			budget = fmt.Sprintf("%d runs", f.runs)
		case f.budget > 0:
			budget = f.budget.String()
		}
		fmt.Fprintf(stdout, "harness: exploring %s (explore seed %d) for %s; varied: %s; output in %s\n", sc.Name, f.seed, budget, sc.Explore, outDir)
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := explore.Search(ctx, sc, opts)
	if rep != nil {
		fmt.Fprintln(stdout)
		_ = explore.WriteTable(stdout, rep)
		fmt.Fprintf(stdout, "\nwrote %s\n", filepath.Join(outDir, explore.ReportFile))
	}
	var ps scenarios.Problems
	switch {
	case errors.As(err, &ps):
		return err
	case err != nil:
		return &ExitError{Code: ExitInfra, Err: err}
	case rep.Failed > 0:
		return &ExitError{Code: ExitFail}
	}
	return nil
}

// exploreCommandLine is how the search was started, for the shrunk files' header.
func exploreCommandLine(cmd *cobra.Command, arg string) string {
	parts := []string{"harness explore", arg}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if fl.Name != "out" && fl.Name != "quiet" {
			parts = append(parts, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	return strings.Join(parts, " ")
}
