package nightly

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"pdsoak/reports"
	"pdsoak/scenarios"
)

// HistoryFile is the archive's history, one line per run of every night.
const HistoryFile = "history.jsonl"

// Defaults of a night.
const (
	DefaultBaselineNights = 3
	DefaultKeep           = 30
)

// Spec is one scenario of the night.
type Spec struct {
	Scenario string        // a path or an embedded name
	Duration time.Duration // 0: the scenario's own
	Soak     bool          // the night's long soak (for the summary)
}

// RunRequest is what a RunFunc is asked to do: run Scenario into OutDir (which does not
// exist yet), for Duration when set, and append its line to History with Label.
type RunRequest struct {
	Scenario string
	Duration time.Duration
	OutDir   string
	History  string
	Label    string
}

// RunFunc runs one scenario and returns the harness's exit code for it (0 pass, 1 fail,
// 2 refused, 3 invalid). Its error is only for a run that could not be attempted.
type RunFunc func(ctx context.Context, r RunRequest) (int, error)

// LoadFunc loads a scenario (strictly, as harness validate does) with the night's
// duration override and returns it; the preflight calls it for every spec.
type LoadFunc func(scenario string, duration time.Duration) (*scenarios.Scenario, error)

// ReportConfigFunc is harness.ReportConfig (injected: this package never imports the
// runner).
type ReportConfigFunc func(*scenarios.Scenario) reports.Config

// Config is one night.
type Config struct {
	Archive string // the archive's root (created when absent)
	SHA     string // the commit under test ("" allowed): names the night and labels history
	Specs   []Spec
}

// RunResult is one scenario's outcome in the night.
type RunResult struct {
	Scenario string `json:"scenario"`
	Dir      string `json:"dir"` // relative to the archive
	Soak     bool   `json:"soak,omitempty"`
	Code     int    `json:"exit_code"`
	Verdict  string `json:"verdict,omitempty"`
	Error    string `json:"error,omitempty"`
	// Baselines are the good nights considered, newest first: the pooled ones, and
	// those refused because they ran against something else (Refused says how).
	Baselines []Baseline `json:"baselines"`
	// Comparison is the state of the one pooled comparison (CompareState).
	Comparison CompareState `json:"comparison,omitempty"`
	// Compare is its compare.html, relative to the archive ("" without one).
	Compare     string   `json:"compare,omitempty"`
	Regressed   bool     `json:"regressed"`
	Regressions []string `json:"regressions,omitempty"`
	// Contended names the contended runs when the comparison is inconclusive.
	Contended []string `json:"contended,omitempty"`
	// Invalid names the invalid runs (tonight's, interrupted or failed by its target or
	// the harness) when the comparison is inconclusive.
	Invalid []string `json:"invalid,omitempty"`
}

// Baseline is one good night considered as a baseline of a run.
type Baseline struct {
	Night string `json:"night"`
	Dir   string `json:"dir"` // the baseline run, relative to the archive
	// Refused says how the night's run differs in what it ran against (backend, server
	// version, target.launch, sim vs real): it is not pooled. Empty: pooled.
	Refused []string `json:"refused,omitempty"`
}

// Result is the night: what night.json holds.
type Result struct {
	Night  string      `json:"night"`
	SHA    string      `json:"sha,omitempty"`
	Start  time.Time   `json:"start"`
	End    time.Time   `json:"end"`
	Runs   []RunResult `json:"runs"`
	Pruned []string    `json:"pruned,omitempty"`
	Code   int         `json:"exit_code"`
}

type options struct {
	now            func() time.Time
	logger         *slog.Logger
	baselineNights int
	keep           int
	compare        reports.CompareOptions
	load           LoadFunc
	stepSummary    string
	out            io.Writer
}

// Option configures Run.
type Option func(*options)

// WithClock replaces time.Now (the night's date and the manifest's times).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLogger logs the night's steps (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithBaselineNights sets N, the good nights a run is compared against (default 3).
func WithBaselineNights(n int) Option { return func(o *options) { o.baselineNights = n } }

// WithKeep sets how many nights the archive keeps (default 30; 0 keeps all).
func WithKeep(n int) Option { return func(o *options) { o.keep = n } }

// WithCompareOptions sets compare's gates (zero fields: compare's defaults).
func WithCompareOptions(c reports.CompareOptions) Option {
	return func(o *options) { o.compare = c }
}

// WithPreflight loads every spec before anything runs; a scenario that does not load
// ends the night with exit 2 and runs nothing.
func WithPreflight(load LoadFunc) Option { return func(o *options) { o.load = load } }

// WithStepSummary appends the night's summary to this file ($GITHUB_STEP_SUMMARY).
func WithStepSummary(path string) Option { return func(o *options) { o.stepSummary = path } }

// WithOutput prints one line per step on w (default: nothing).
func WithOutput(w io.Writer) Option { return func(o *options) { o.out = w } }

// ErrUsage marks a night that could not start: bad configuration or a scenario that
// does not load. Nothing ran.
var ErrUsage = errors.New("nightly: cannot start the night")

// Run runs one night and returns its result; res.Code is the exit code. The error is
// for a night that could not start (ErrUsage: exit 2) or could not write its archive
// (exit 3); a failed or invalid run is not an error.
func Run(ctx context.Context, cfg Config, run RunFunc, reportConfig ReportConfigFunc, opts ...Option) (*Result, error) {
	o := options{now: time.Now, logger: slog.New(slog.DiscardHandler), baselineNights: DefaultBaselineNights, keep: DefaultKeep, out: io.Discard}
	for _, opt := range opts {
		opt(&o)
	}
	names, err := preflight(cfg, o)
	if err != nil {
		return nil, err
	}
	nightsRoot := filepath.Join(cfg.Archive, NightsDir)
	if err := os.MkdirAll(nightsRoot, 0o755); err != nil {
		return nil, fmt.Errorf("nightly: archive: %w", err)
	}
	start := o.now()
	base, err := NightName(start, cfg.SHA)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	night := Unique(base, func(n string) bool { _, err := os.Stat(filepath.Join(nightsRoot, n)); return err == nil })
	nightDir := filepath.Join(nightsRoot, night)
	if err := os.MkdirAll(nightDir, 0o755); err != nil {
		return nil, fmt.Errorf("nightly: archive: %w", err)
	}
	histPath := filepath.Join(cfg.Archive, HistoryFile)
	before, err := readHistory(histPath)
	if err != nil {
		return nil, err
	}
	res := &Result{Night: night, SHA: cfg.SHA, Start: start.UTC()}
	fmt.Fprintf(o.out, "nightly: night %s: %d runs into %s\n", night, len(cfg.Specs), nightDir)
	label := cfg.SHA
	if label == "" {
		label = night
	}
	for i, spec := range cfg.Specs {
		rr := RunResult{Scenario: names[i], Dir: filepath.ToSlash(filepath.Join(NightsDir, night, names[i])), Soak: spec.Soak, Baselines: []Baseline{}}
		if ctx.Err() != nil {
			rr.Code, rr.Error = ExitInfra, "not run: the night was interrupted"
			res.Runs = append(res.Runs, rr)
			continue
		}
		outDir := filepath.Join(cfg.Archive, filepath.FromSlash(rr.Dir))
		o.logger.Info("run", "scenario", spec.Scenario, "out", outDir, "duration", spec.Duration)
		code, err := run(ctx, RunRequest{Scenario: spec.Scenario, Duration: spec.Duration, OutDir: outDir, History: histPath, Label: label})
		rr.Code = code
		if err != nil {
			rr.Code, rr.Error = ExitInfra, err.Error()
		}
		rr.Verdict = readVerdict(outDir)
		if rr.Verdict != "" {
			compareRun(cfg.Archive, before, night, &rr, reportConfig, o)
		}
		fmt.Fprintf(o.out, "nightly: %s: exit %d%s\n", names[i], rr.Code, regressedText(rr))
		res.Runs = append(res.Runs, rr)
	}
	res.Pruned = prune(cfg.Archive, night, o)
	if err := writeTrend(cfg.Archive); err != nil {
		return nil, err
	}
	res.End = o.now().UTC()
	res.Code = ExitCode(res.Runs)
	if err := writeNight(cfg.Archive, nightDir, res, o); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.out, "nightly: night %s: exit %d; trend %s\n", night, res.Code, filepath.Join(cfg.Archive, reports.TrendFile))
	return res, nil
}

func regressedText(rr RunResult) string {
	n := len(pooled(rr.Baselines))
	switch rr.Comparison {
	case CompareRegressed:
		return fmt.Sprintf(", REGRESSED against %d pooled baseline nights", n)
	case CompareInconclusive:
		return fmt.Sprintf(", INCONCLUSIVE against %d pooled baseline nights (%s)", n, strings.Join(append(append([]string(nil), rr.Invalid...), rr.Contended...), "; "))
	case CompareOK:
		return fmt.Sprintf(", no regression against %d pooled baseline nights", n)
	}
	return ", no baseline night"
}

// pooled are the baselines that were pooled (not refused).
func pooled(bs []Baseline) []Baseline {
	var out []Baseline
	for _, b := range bs {
		if len(b.Refused) == 0 {
			out = append(out, b)
		}
	}
	return out
}

// preflight checks the configuration and loads every scenario; it returns each spec's
// scenario name, which names its directory.
func preflight(cfg Config, o options) ([]string, error) {
	if cfg.Archive == "" {
		return nil, fmt.Errorf("%w: no archive directory", ErrUsage)
	}
	if len(cfg.Specs) == 0 {
		return nil, fmt.Errorf("%w: no scenario to run", ErrUsage)
	}
	var problems []error
	names := make([]string, len(cfg.Specs))
	seen := map[string]string{}
	for i, s := range cfg.Specs {
		names[i] = scenarioBase(s.Scenario)
		if o.load != nil {
			sc, err := o.load(s.Scenario, s.Duration)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", s.Scenario, err))
				continue
			}
			names[i] = sc.Name
		}
		if prev, ok := seen[names[i]]; ok {
			problems = append(problems, fmt.Errorf("%s and %s are both scenario %q: a night runs each scenario once (its directory is its name)", prev, s.Scenario, names[i]))
		}
		seen[names[i]] = s.Scenario
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrUsage, errors.Join(problems...))
	}
	return names, nil
}

// scenarioBase is a scenario's name without loading it: the file's base name.
func scenarioBase(s string) string {
	b := filepath.Base(s)
	return b[:len(b)-len(filepath.Ext(b))]
}

func readHistory(path string) ([]reports.HistoryEntry, error) {
	entries, _, err := readHistoryProblems(path)
	return entries, err
}

// readHistoryProblems is readHistory with the malformed lines it skipped (the trend page
// lists them).
func readHistoryProblems(path string) ([]reports.HistoryEntry, []reports.HistoryProblem, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("nightly: history: %w", err)
	}
	defer f.Close()
	entries, problems, err := reports.ReadHistory(f)
	if err != nil {
		return nil, nil, fmt.Errorf("nightly: %w", err)
	}
	return entries, problems, nil
}
