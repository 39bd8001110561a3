package gatecal

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"pdsoak/harness"
	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/sim"
)

// Scenario is the calibration scenario (scenario.yaml).
//
//go:embed scenario.yaml
var Scenario []byte

// Defaults of Config.
const (
	DefaultPairs = 40
	// DefaultSeed is the first pair's BASE seed; pair i runs seeds Seed+2i and Seed+2i+1.
	DefaultSeed = 1000
)

// DefaultSlowdowns are the known regressions the goals name: 10% and 25% slower.
var DefaultSlowdowns = []float64{0.10, 0.25}

// RunFunc runs one scenario into outDir (events.jsonl).
type RunFunc func(ctx context.Context, sc *scenarios.Scenario, outDir string) error

// SimRun runs a scenario in the simulator.
func SimRun(ctx context.Context, sc *scenarios.Scenario, outDir string) error {
	return sim.Run(ctx, sc, sim.Options{OutDir: outDir})
}

// RealRun returns a RunFunc that runs on the real reference server started with
// pdserver (argv of the reference server's root command, as harness.Options takes).
func RealRun(pdserver []string) RunFunc {
	return func(ctx context.Context, sc *scenarios.Scenario, outDir string) error {
		return harness.Run(ctx, sc, harness.Options{OutDir: outDir, PDServerCommand: pdserver,
			Logger: slog.New(slog.DiscardHandler)})
	}
}

// Config says what to calibrate. Zero fields take the defaults.
type Config struct {
	Pairs     int
	Slowdowns []float64
	Seed      int64
	// Scenario is the YAML to run (nil: the embedded calibration scenario).
	Scenario []byte
	// Run runs one scenario (nil: SimRun).
	Run RunFunc
	// Mode names how the runs were made in the report ("sim" or "real").
	Mode string
	// Dir holds the runs' outputs (empty: a temporary directory, removed at the end).
	Dir string
	// Parallel bounds the runs at once (0: the CPU count; keep 1 for real runs).
	Parallel int
	// Compare are the options each pair is compared with (zero: compare's defaults).
	Compare reports.CompareOptions
	// Progress, when set, sees one line per finished run.
	Progress func(string)
}

// Pair is one compared pair.
type Pair struct {
	BaseSeed, NewSeed int64
	// Slowdown is NEW's known slowdown (0: a same-server pair).
	Slowdown float64
	Rows     []reports.Row
}

// Report is a calibration's outcome.
type Report struct {
	Mode      string
	Scenario  string
	Pairs     int
	Slowdowns []float64
	Floors    map[string]reports.Floor
	Results   []Pair
}

// Run makes the runs and compares the pairs.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Pairs <= 0 {
		cfg.Pairs = DefaultPairs
	}
	if cfg.Slowdowns == nil {
		cfg.Slowdowns = DefaultSlowdowns
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if cfg.Scenario == nil {
		cfg.Scenario = Scenario
	}
	if cfg.Run == nil {
		cfg.Run, cfg.Mode = SimRun, ledger.ModeSim
	}
	if cfg.Mode == "" {
		cfg.Mode = "real"
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.NumCPU()
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "gatecal-")
		if err != nil {
			return nil, fmt.Errorf("gatecal: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	sc, err := scenarios.Parse("gate-calibration.yaml", cfg.Scenario)
	if err != nil {
		return nil, fmt.Errorf("gatecal: scenario: %w", err)
	}

	// Runs: BASE i (seed Seed+2i), NEW i (Seed+2i+1) and NEW i at each slowdown (same
	// seed as NEW i, so a slowdown pair differs from a same-server pair only by it).
	type job struct {
		seed     int64
		slowdown float64
	}
	var jobs []job
	for i := range cfg.Pairs {
		b, n := cfg.Seed+2*int64(i), cfg.Seed+2*int64(i)+1
		jobs = append(jobs, job{b, 0}, job{n, 0})
		for _, s := range cfg.Slowdowns {
			jobs = append(jobs, job{n, s})
		}
	}
	runs := make([]*reports.Run, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			run, err := runOne(ctx, cfg, sc, j.seed, j.slowdown)
			runs[i], errs[i] = run, err
			if cfg.Progress != nil && err == nil {
				mu.Lock()
				done++
				cfg.Progress(fmt.Sprintf("%d/%d runs done: seed %d, slowdown %g%%: %d requests", done, len(jobs), j.seed, 100*j.slowdown, run.Results.Requests))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	opts := cfg.Compare
	rep := &Report{Mode: cfg.Mode, Scenario: sc.Name, Pairs: cfg.Pairs, Slowdowns: cfg.Slowdowns}
	per := 2 + len(cfg.Slowdowns)
	pairs := make([]Pair, 0, cfg.Pairs*(1+len(cfg.Slowdowns)))
	for i := range cfg.Pairs {
		for k := 1; k < per; k++ {
			j := jobs[i*per+k]
			pairs = append(pairs, Pair{BaseSeed: jobs[i*per].seed, NewSeed: j.seed, Slowdown: j.slowdown})
		}
	}
	// Compare the pairs in parallel: each is a pure function of two runs.
	var cwg sync.WaitGroup
	for p := range pairs {
		cwg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			i, k := p/(per-1), p%(per-1)+1
			c := reports.Compare(runs[i*per], runs[i*per+k], "calibration", "calibration", opts)
			pairs[p].Rows = c.Rows
			if p == 0 {
				rep.Floors = c.Options.Floors
			}
		})
	}
	cwg.Wait()
	rep.Results = pairs
	return rep, nil
}

// runOne runs the scenario with seed, NEW's workers slowed by slowdown.
func runOne(ctx context.Context, cfg Config, base *scenarios.Scenario, seed int64, slowdown float64) (*reports.Run, error) {
	sc := *base
	sc.Seed = seed
	sc.Reference.Args = append([]string(nil), base.Reference.Args...)
	if slowdown > 0 {
		sc.Reference.Args = append(sc.Reference.Args, "--sim-slowdown", strconv.FormatFloat(slowdown, 'g', -1, 64))
	}
	dir := filepath.Join(cfg.Dir, fmt.Sprintf("seed%d-slow%g", seed, slowdown))
	if err := cfg.Run(ctx, &sc, dir); err != nil {
		return nil, fmt.Errorf("gatecal: seed %d, slowdown %g: %w", seed, slowdown, err)
	}
	run, err := reports.ComputeRun(filepath.Join(dir, ledger.EventsFile), judge.ReportConfig(&sc))
	if err != nil {
		return nil, fmt.Errorf("gatecal: seed %d: %w", seed, err)
	}
	if run.Results.Verdict != reports.VerdictPass {
		return nil, fmt.Errorf("gatecal: seed %d, slowdown %g: the run did not pass (%s); a calibration needs healthy runs", seed, slowdown, run.Results.Verdict)
	}
	return run, nil
}
