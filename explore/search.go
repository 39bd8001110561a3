package explore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

// RunFunc runs a validated scenario under simulation and writes outDir/events.jsonl
// exactly like a real run. Its error says the run itself failed (infrastructure); the
// verdict comes from the ledger.
type RunFunc func(ctx context.Context, sc *scenarios.Scenario, outDir string) error

// Options configures a search.
type Options struct {
	// Run runs one scenario (sim.Run in the harness). Required.
	Run RunFunc
	// Runs bounds the number of runs; Time bounds the search's wall time (runs in
	// flight finish). Either or both; neither: DefaultRuns.
	Runs int
	Time time.Duration
	// Parallel is how many runs go at once. Default GOMAXPROCS.
	Parallel int
	// Seed is the explore seed: run i's parameters depend on (Seed, i) only.
	Seed int64
	// OutDir receives explore.json, the shrunk scenarios, the first failing run of each
	// signature (runs/run-N) and the shrunk scenarios' runs (shrunk-SIG/). Required.
	OutDir string
	// NoShrink skips shrinking.
	NoShrink bool
	// MaxShrinkRuns bounds the runs spent shrinking one failure. Default
	// DefaultMaxShrinkRuns.
	MaxShrinkRuns int
	// FaultTypes is the fault catalogue (explore.faults: catalogue) and what the
	// generated scenarios are validated against; the harness passes the chaos registry.
	FaultTypes map[string]scenarios.FaultType
	// FaultFilter (optional) leaves out the catalogue faults it refuses: the simulator
	// cannot model a prefill crash on a decode worker, and a target kind does not say
	// which role a fault needs.
	FaultFilter FaultFilter
	// ReportConfig says how reports judges a run (the harness passes
	// harness/judge.ReportConfig). Default: the scenario's assertions and recovery bounds.
	ReportConfig func(*scenarios.Scenario) reports.Config
	// Progress, when set, gets a line per new failure signature and per shrink.
	Progress io.Writer
	// Command is how the search was started, for the header of the shrunk files.
	Command string
	// Now is the clock of the time budget and the elapsed time (tests). Default time.Now.
	Now func() time.Time
}

// Defaults.
const (
	DefaultRuns          = 100
	DefaultMaxShrinkRuns = 300
	// ReportFile is the search's coverage report in the output directory.
	ReportFile = "explore.json"
)

// RunResult is what one run of the search gave.
type RunResult struct {
	Index     int             `json:"index"`
	Seed      int64           `json:"seed"`
	Verdict   reports.Verdict `json:"verdict,omitempty"`
	Signature string          `json:"signature,omitempty"`
	// Invalid is the first reason of an invalid verdict.
	Invalid string `json:"invalid,omitempty"`
	// Error is the run's own error (infrastructure, or a scenario the generator made
	// that did not validate).
	Error string `json:"error,omitempty"`
	// Ledger is the SHA-256 of the run's events.jsonl.
	Ledger [32]byte `json:"-"`
	params Params
	dir    string
}

// searcher holds what every run of one search shares.
type searcher struct {
	space *Space
	opts  Options
	tmp   string          // the runs' own directories go under it
	used  map[string]bool // shrunk file names written
}

// Search explores a loaded scenario (defaults applied, validated): Options.Runs runs
// (or as many as Options.Time allows) with parameters drawn from its explore section,
// then shrinks the first run of each failure signature to a minimal scenario written
// to the output directory. The Report is returned with a nil error even when failures
// were found; an error means the search itself could not be made (bad input: Problems;
// no run completed; the context was cancelled: with a partial Report).
func Search(ctx context.Context, sc *scenarios.Scenario, opts Options) (*Report, error) {
	if err := Check(sc); err != nil {
		return nil, err
	}
	if opts.Run == nil {
		return nil, errors.New("explore: no run function")
	}
	if opts.OutDir == "" {
		return nil, errors.New("explore: no output directory")
	}
	if opts.Runs <= 0 && opts.Time <= 0 {
		opts.Runs = DefaultRuns
	}
	if opts.Parallel <= 0 {
		opts.Parallel = runtime.GOMAXPROCS(0)
	}
	if opts.MaxShrinkRuns <= 0 {
		opts.MaxShrinkRuns = DefaultMaxShrinkRuns
	}
	if opts.ReportConfig == nil {
		opts.ReportConfig = reportConfig
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	tmp, err := os.MkdirTemp(opts.OutDir, ".runs-")
	if err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	defer os.RemoveAll(tmp)
	s := &searcher{space: NewSpace(sc, opts.FaultTypes, opts.FaultFilter), opts: opts, tmp: tmp}

	start := opts.Now()
	results := s.search(ctx, start)
	rep := s.report(results)
	rep.Elapsed = opts.Now().Sub(start).Seconds()
	if rep.Elapsed > 0 {
		rep.RunsPerSecond = float64(rep.Runs) / rep.Elapsed
	}
	if err := s.keepFirstRuns(rep, results); err != nil {
		return rep, err
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
		_ = WriteJSON(rep, filepath.Join(opts.OutDir, ReportFile))
		return rep, fmt.Errorf("explore: interrupted: %w", ctx.Err())
	}
	if rep.Runs > 0 && rep.Errors == rep.Runs {
		_ = WriteJSON(rep, filepath.Join(opts.OutDir, ReportFile))
		return rep, fmt.Errorf("explore: none of the %d runs could be made; the first: %s", rep.Runs, results[0].Error)
	}
	if !opts.NoShrink {
		for i := range rep.Signatures {
			sr := &rep.Signatures[i]
			sh := s.shrink(ctx, sr, find(results, sr.FirstRun))
			sr.Shrunk = sh
			rep.ShrinkElapsed = opts.Now().Sub(start).Seconds() - rep.Elapsed
		}
	}
	if err := WriteJSON(rep, filepath.Join(opts.OutDir, ReportFile)); err != nil {
		return rep, err
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
		return rep, fmt.Errorf("explore: interrupted: %w", ctx.Err())
	}
	return rep, nil
}

// Check refuses a scenario that cannot be explored: one whose target is not the
// embedded reference server (explore runs only under simulation).
func Check(sc *scenarios.Scenario) error {
	field := ""
	switch {
	case sc.Target.URL != "":
		field = "target.url"
	case len(sc.Target.Launch) > 0:
		field = "target.launch"
	default:
		return nil
	}
	return scenarios.Problems{{File: sc.File, Line: sc.Line(field), Path: field,
		Msg: "explore runs only under simulation of the embedded reference server; an external target cannot be explored"}}
}

// search runs the budget on Parallel workers. Run indices are handed out in order, and
// every run handed out finishes, so the runs made are exactly 0..n-1 whatever the
// parallelism.
func (s *searcher) search(ctx context.Context, start time.Time) []RunResult {
	var (
		mu      sync.Mutex
		next    int
		results []RunResult
		first   = map[string]int{} // signature -> index of its kept run
		wg      sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil || (s.opts.Runs > 0 && next >= s.opts.Runs) ||
			(s.opts.Time > 0 && s.opts.Now().Sub(start) >= s.opts.Time) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range s.opts.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				r := s.runOne(ctx, i, s.space.Draw(s.opts.Seed, i))
				if ctx.Err() != nil && r.Error != "" {
					return // cut short by the interruption: not a result
				}
				mu.Lock()
				// Keep only the lowest-numbered failing run of each signature on disk.
				isNew := false
				if r.Signature != "" {
					j, seen := first[r.Signature]
					isNew = !seen
					if !seen || i < j {
						first[r.Signature] = i
					} else {
						os.RemoveAll(r.dir)
						r.dir = ""
					}
				}
				results = append(results, r)
				if isNew && s.opts.Progress != nil { // under the lock: one writer at a time
					fmt.Fprintf(s.opts.Progress, "explore: run %d (seed %d) fails: %s\n", i, r.Seed, r.Signature)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(results, func(a, b int) bool { return results[a].Index < results[b].Index })
	for i := range results {
		if results[i].dir != "" && first[results[i].Signature] != results[i].Index {
			os.RemoveAll(results[i].dir)
			results[i].dir = ""
		}
	}
	return results
}

// runOne makes run i: renders and loads its scenario, runs it in its own directory
// and judges the ledger with reports. Only a failing run's directory is kept.
func (s *searcher) runOne(ctx context.Context, i int, p Params) RunResult {
	r := RunResult{Index: i, Seed: p.Seed, params: p}
	prefix := fmt.Sprintf("run-%d-", i)
	if i < 0 {
		prefix = "shrink-"
	}
	dir, err := os.MkdirTemp(s.tmp, prefix)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	data, sc, err := s.materialise(p, nil)
	if err != nil {
		r.Error = "the generated scenario is invalid: " + err.Error()
		return r
	}
	if err := os.WriteFile(filepath.Join(dir, "scenario.yaml"), data, 0o644); err != nil {
		r.Error = err.Error()
		return r
	}
	if err := s.opts.Run(ctx, sc, dir); err != nil {
		r.Error = err.Error()
		return r
	}
	res, sum, err := judge(filepath.Join(dir, ledger.EventsFile), s.opts.ReportConfig(sc))
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Verdict, r.Ledger, r.Signature = res.Verdict, sum, Signature(res)
	if res.Verdict == reports.VerdictInvalid && len(res.InvalidReasons) > 0 {
		r.Invalid = res.InvalidReasons[0]
	}
	if r.Signature != "" {
		keep, r.dir = true, dir
	}
	return r
}

// materialise renders p's scenario and loads it back with the strict loader: what runs
// is exactly what a file with these bytes gives.
func (s *searcher) materialise(p Params, header []string) ([]byte, *scenarios.Scenario, error) {
	data, err := Render(s.space.Apply(p), header)
	if err != nil {
		return nil, nil, err
	}
	sc, err := scenarios.Parse(s.space.base.Name+".yaml", data, scenarios.WithFaultTypes(s.opts.FaultTypes))
	if err != nil {
		return nil, nil, err
	}
	return data, sc, nil
}

// judge computes a ledger's verdict with reports (the only place a verdict is
// decided) and hashes the ledger.
func judge(path string, cfg reports.Config) (*reports.Results, [32]byte, error) {
	var sum [32]byte
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, sum, fmt.Errorf("explore: the run wrote no ledger: %w", err)
	}
	b := reports.NewBuilder(cfg)
	if _, err := ledger.Read(bytes.NewReader(data), func(e ledger.Event) error { b.Add(e); return nil }); err != nil {
		return nil, sum, fmt.Errorf("explore: %w", err)
	}
	return b.Results(), sha256.Sum256(data), nil
}

// reportConfig is how reports judges a run of sc when Options.ReportConfig is not set
// (the same fields as harness/judge.ReportConfig).
func reportConfig(sc *scenarios.Scenario) reports.Config {
	return reports.Config{
		Scenario: sc.Name, Seed: sc.Seed, Target: scenarios.Plan(sc).Target, Assertions: sc.Assertions,
		Recovery: reports.RecoveryConfig{Window: sc.Recovery.Window.D(), Within: sc.Recovery.Within.D(), Threshold: sc.Recovery.Threshold},
	}
}

// keepFirstRuns moves the first failing run of each signature to runs/run-N.
func (s *searcher) keepFirstRuns(rep *Report, results []RunResult) error {
	for i := range rep.Signatures {
		sr := &rep.Signatures[i]
		r := find(results, sr.FirstRun)
		if r == nil || r.dir == "" {
			continue
		}
		dst := filepath.Join(s.opts.OutDir, "runs", fmt.Sprintf("run-%d", r.Index))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("explore: %w", err)
		}
		os.RemoveAll(dst)
		if err := os.Rename(r.dir, dst); err != nil {
			return fmt.Errorf("explore: keep run %d: %w", r.Index, err)
		}
		r.dir = ""
		sr.RunDir = filepath.Join("runs", fmt.Sprintf("run-%d", r.Index))
	}
	return nil
}

// find returns run idx of results (sorted by index), or nil.
func find(results []RunResult, idx int) *RunResult {
	i := sort.Search(len(results), func(i int) bool { return results[i].Index >= idx })
	if i < len(results) && results[i].Index == idx {
		return &results[i]
	}
	return nil
}
