package nightly

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/sim"
)

const poolYAML = `
name: pooled
seed: 3
duration: 4s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: steady, type: open_loop, pacer: {type: constant, rate: 20}, max_tokens: 4}
deadlines: {first_token: 5s, stall: 5s, total: 10s}
assertions: [no_silent_drops]
`

// simRun runs the scenario under the simulator (real ledgers, fast) with the reference
// backend backend() gives for the night, and leaves what a harness run leaves: the
// ledger, scenario.json, results.json and a history line.
func simRun(backend func() string) RunFunc {
	return simRunWith(func(sc *scenarios.Scenario) { sc.Reference.Backend = backend() })
}

// simRunWith is simRun with the scenario changed by mod first.
func simRunWith(mod func(*scenarios.Scenario)) RunFunc {
	return func(ctx context.Context, r RunRequest) (int, error) {
		sc, err := scenarios.Parse("pooled.yaml", []byte(poolYAML))
		if err != nil {
			return 0, err
		}
		mod(sc)
		if err := sim.Run(ctx, sc, sim.Options{OutDir: r.OutDir}); err != nil {
			return 0, err
		}
		data, err := json.Marshal(sc)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(r.OutDir, ResolvedFile), data, 0o644); err != nil {
			return 0, err
		}
		evs, _, err := ledger.ReadFile(filepath.Join(r.OutDir, ledger.EventsFile))
		if err != nil {
			return 0, err
		}
		res := reports.Compute(evs, judge.ReportConfig(sc))
		out, _ := json.Marshal(map[string]any{"verdict": res.Verdict})
		if err := os.WriteFile(filepath.Join(r.OutDir, reports.ResultsFile), out, 0o644); err != nil {
			return 0, err
		}
		digest, err := reports.ScenarioDigest(data)
		if err != nil {
			return 0, err
		}
		rel, _ := filepath.Rel(filepath.Dir(r.History), r.OutDir)
		return 0, reports.AppendHistory(r.History, reports.HistoryEntry{Scenario: sc.Name, Digest: digest, Label: r.Label,
			Time: time.Now(), Verdict: res.Verdict, Dir: filepath.ToSlash(rel)})
	}
}

// TestNightPoolsBaselinesAndRefusesAnotherBackend: four nights of one scenario. The
// first ran on another backend: the fourth night pools the second and third (one
// comparison, one compare/ directory) and lists the first as refused, naming the
// difference, in night.json and in the summary.
func TestNightPoolsBaselinesAndRefusesAnotherBackend(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "a")
	clock := time.Date(2026, 12, 1, 2, 17, 0, 0, time.UTC)
	backends := []string{"simtime", "tinyref", "tinyref", "tinyref"}
	var results []*Result
	for i, b := range backends {
		cfg := Config{Archive: archive, SHA: strings.Repeat(string(rune('a'+i)), 8), Specs: []Spec{{Scenario: "pooled"}}}
		res, err := Run(context.Background(), cfg, simRun(func() string { return b }), judge.ReportConfig,
			WithClock(func() time.Time { return clock }), WithBaselineNights(3))
		require.NoError(t, err)
		clock = clock.Add(24 * time.Hour)
		results = append(results, res)
	}
	// Night 2 had only the simtime night before it: refused, so no comparison.
	r2 := results[1].Runs[0]
	require.Len(t, r2.Baselines, 1)
	assert.Equal(t, results[0].Night, r2.Baselines[0].Night)
	assert.Equal(t, []string{`backend "simtime" vs "tinyref"`}, r2.Baselines[0].Refused)
	assert.Equal(t, CompareNone, r2.Comparison)
	assert.Empty(t, r2.Compare)

	r4 := results[3].Runs[0]
	var nights, refused []string
	for _, b := range r4.Baselines {
		if len(b.Refused) > 0 {
			refused = append(refused, b.Night)
		} else {
			nights = append(nights, b.Night)
		}
	}
	assert.Equal(t, []string{results[2].Night, results[1].Night}, nights, "the good nights on the same backend, newest first")
	assert.Equal(t, []string{results[0].Night}, refused)
	assert.Equal(t, CompareOK, r4.Comparison, "the same simulated run every night: nothing moved")
	assert.Equal(t, ExitPass, results[3].Code)
	assert.Equal(t, "nights/"+results[3].Night+"/pooled/compare/compare.html", r4.Compare)
	md, err := os.ReadFile(filepath.Join(archive, "nights", results[3].Night, "pooled", CompareDir, reports.CompareMarkdownFile))
	require.NoError(t, err)
	assert.Contains(t, string(md), "BASE pools 2 runs")

	var m Result
	data, err := os.ReadFile(filepath.Join(archive, NightsDir, results[3].Night, NightFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Equal(t, r4, m.Runs[0], "night.json holds the comparison")
	summary, err := os.ReadFile(filepath.Join(archive, NightsDir, results[3].Night, SummaryFile))
	require.NoError(t, err)
	assert.Contains(t, string(summary), "| pooled | 0 | pass | "+results[2].Night+", "+results[1].Night+", "+results[0].Night+" (refused) | no regression (2 pooled) |")
	assert.Contains(t, string(summary), "baseline "+results[0].Night+` refused (not pooled): backend "simtime" vs "tinyref"`)
}

// TestSummaryInconclusive: an inconclusive comparison is its own state in the summary
// (not a regression, not silent) and makes the night INCONCLUSIVE, exit 3.
func TestSummaryInconclusive(t *testing.T) {
	runs := []RunResult{{Scenario: "s", Dir: "nights/n/s", Verdict: "pass", Baselines: []Baseline{{Night: "n0", Dir: "nights/n0/s"}},
		Comparison: CompareInconclusive, Regressions: []string{"p99(ttft) +40%"}, Contended: []string{"NEW was contended: cpu pressure 80% > 40%"}}}
	res := &Result{Night: "n", Runs: runs, Code: ExitCode(runs)}
	require.Equal(t, ExitInfra, res.Code)
	var b strings.Builder
	WriteSummary(&b, res, func(string) string { return "" })
	assert.Contains(t, b.String(), "## Nightly soak n: INCONCLUSIVE (exit 3)")
	assert.Contains(t, b.String(), "| s | 0 | pass | n0 | **INCONCLUSIVE** (contended) |")
	assert.Contains(t, b.String(), "- s: inconclusive, not judged: NEW was contended: cpu pressure 80% > 40%; rerun on a quiet machine")
	assert.NotContains(t, b.String(), "p99(ttft) +40%", "a contended run's figures are not reported as regressions")
}

// TestNightInterruptedRunIsNotARegression: two good nights, then a night whose run is
// interrupted (the job's SIGTERM): its ledger ends interrupted, its verdict is invalid
// (exit 3). The comparison with the good nights must not turn that into a regression
// (exit 1): an invalid run's figures cannot be trusted, so the night is 3, as the README
// promises for an invalid run.
func TestNightInterruptedRunIsNotARegression(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "a")
	clock := time.Date(2026, 12, 1, 2, 17, 0, 0, time.UTC)
	good := simRun(func() string { return "tinyref" })
	interrupted := func(ctx context.Context, r RunRequest) (int, error) {
		cut, cancel := context.WithCancel(ctx)
		cancel() // the signal arrives as the run starts
		if _, err := good(cut, r); err != nil {
			return 0, err
		}
		if v := readVerdict(r.OutDir); v != string(reports.VerdictInvalid) {
			return 0, fmt.Errorf("the interrupted run's verdict is %q, want invalid", v)
		}
		return ExitInfra, nil
	}
	var last *Result
	for i, run := range []RunFunc{good, good, interrupted} {
		cfg := Config{Archive: archive, SHA: strings.Repeat(string(rune('a'+i)), 8), Specs: []Spec{{Scenario: "pooled"}}}
		res, err := Run(context.Background(), cfg, run, judge.ReportConfig, WithClock(func() time.Time { return clock }))
		require.NoError(t, err)
		clock = clock.Add(24 * time.Hour)
		last = res
	}
	rr := last.Runs[0]
	require.Len(t, pooled(rr.Baselines), 2, "both good nights are the baseline")
	assert.False(t, rr.Regressed, "an interrupted run is not evidence of a regression: %q", rr.Regressions)
	assert.Equal(t, CompareInconclusive, rr.Comparison)
	assert.Equal(t, ExitInfra, last.Code, "an invalid run makes the night 3, not 1")
	summary, err := os.ReadFile(filepath.Join(archive, NightsDir, last.Night, SummaryFile))
	require.NoError(t, err)
	assert.Contains(t, string(summary), "INVALID (exit 3)")
	assert.Contains(t, string(summary), "NEW was invalid")
	assert.NotContains(t, string(summary), "contended")
}

// busy makes a run's ledger say its machine was contended: CPU pressure 90% in every
// window (a compile beside the soak), the run itself unchanged.
func busy(run RunFunc) RunFunc {
	return func(ctx context.Context, r RunRequest) (int, error) {
		code, err := run(ctx, r)
		if err != nil {
			return code, err
		}
		path := filepath.Join(r.OutDir, ledger.EventsFile)
		evs, _, err := ledger.ReadFile(path)
		if err != nil {
			return 0, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		for i := 1; i <= 3; i++ {
			line, _ := json.Marshal(ledger.Event{Time: evs[0].Time.Add(time.Duration(i) * time.Second), Type: ledger.EventSample,
				Source: ledger.ContentionSource, Metrics: map[string]float64{ledger.ContentionCPUPressure: 0.9}})
			if _, err := f.Write(append(line, '\n')); err != nil {
				return 0, err
			}
		}
		return code, nil
	}
}

// TestNightContendedBaselineNotPooled: night 2 passed on a busy machine. Pooled, it
// would make every comparison of the next --baseline-nights quiet nights inconclusive
// (exit 3) though nothing about them was: it is listed as refused, saying why, and the
// quiet nights are compared.
func TestNightContendedBaselineNotPooled(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "a")
	clock := time.Date(2026, 12, 1, 2, 17, 0, 0, time.UTC)
	good := simRun(func() string { return "tinyref" })
	var results []*Result
	for i, run := range []RunFunc{good, busy(good), good} {
		cfg := Config{Archive: archive, SHA: strings.Repeat(string(rune('a'+i)), 8), Specs: []Spec{{Scenario: "pooled"}}}
		res, err := Run(context.Background(), cfg, run, judge.ReportConfig, WithClock(func() time.Time { return clock }))
		require.NoError(t, err)
		clock = clock.Add(24 * time.Hour)
		results = append(results, res)
	}
	rr := results[2].Runs[0]
	assert.Equal(t, CompareOK, rr.Comparison, "%q", rr.Contended)
	assert.Equal(t, ExitPass, results[2].Code, "a quiet night that passed")
	require.Len(t, rr.Baselines, 2)
	assert.Equal(t, results[1].Night, rr.Baselines[0].Night)
	require.Len(t, rr.Baselines[0].Refused, 1, "the busy night is not a bar")
	assert.Contains(t, rr.Baselines[0].Refused[0], "contended: CPU pressure")
	assert.Equal(t, []Baseline{rr.Baselines[1]}, pooled(rr.Baselines))
}

// TestNightRegressionKeptWhenCompareCannotBeWritten: tonight's run is twice as slow as
// the good night before, and its compare/ directory cannot be written (a full disk; here
// a file in its way). The regression must still be the night's answer (exit 1), not
// lost with the files.
func TestNightRegressionKeptWhenCompareCannotBeWritten(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "a")
	clock := time.Date(2026, 12, 1, 2, 17, 0, 0, time.UTC)
	speed := func(slowdown string) RunFunc {
		return simRunWith(func(sc *scenarios.Scenario) {
			sc.Reference.Backend = "simtime"
			if slowdown != "" {
				sc.Reference.Args = append(sc.Reference.Args, "--sim-slowdown", slowdown)
			}
		})
	}
	blocked := func(ctx context.Context, r RunRequest) (int, error) {
		code, err := speed("1.0")(ctx, r)
		if err != nil {
			return code, err
		}
		return code, os.WriteFile(filepath.Join(r.OutDir, CompareDir), []byte("in the way"), 0o644)
	}
	var results []*Result
	for i, run := range []RunFunc{speed(""), blocked} {
		cfg := Config{Archive: archive, SHA: strings.Repeat(string(rune('a'+i)), 8), Specs: []Spec{{Scenario: "pooled"}}}
		res, err := Run(context.Background(), cfg, run, judge.ReportConfig, WithClock(func() time.Time { return clock }))
		require.NoError(t, err)
		clock = clock.Add(24 * time.Hour)
		results = append(results, res)
	}
	rr := results[1].Runs[0]
	require.Len(t, pooled(rr.Baselines), 1)
	assert.Equal(t, CompareRegressed, rr.Comparison, "twice as slow")
	assert.True(t, rr.Regressed)
	assert.NotEmpty(t, rr.Regressions)
	assert.Empty(t, rr.Compare, "no compare.html was written")
	assert.Equal(t, ExitFail, results[1].Code)
}
