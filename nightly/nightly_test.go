package nightly

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/reports"
	"pdsoak/scenarios"
)

// fakeRun writes what a run leaves that the night reads without the runner:
// results.json with a verdict and a history line. codes maps scenario -> exit code.
func fakeRun(codes map[string]int, calls *[]RunRequest) RunFunc {
	return func(_ context.Context, r RunRequest) (int, error) {
		*calls = append(*calls, r)
		if err := os.MkdirAll(r.OutDir, 0o755); err != nil {
			return 0, err
		}
		code := codes[r.Scenario]
		verdict := map[int]reports.Verdict{0: reports.VerdictPass, 1: reports.VerdictFail, 3: reports.VerdictInvalid}[code]
		data, _ := json.Marshal(map[string]any{"verdict": verdict})
		if err := os.WriteFile(filepath.Join(r.OutDir, reports.ResultsFile), data, 0o644); err != nil {
			return 0, err
		}
		rel, _ := filepath.Rel(filepath.Dir(r.History), r.OutDir)
		return code, reports.AppendHistory(r.History, reports.HistoryEntry{Scenario: r.Scenario, Digest: "d", Label: r.Label, Time: time.Now(), Verdict: verdict, Dir: filepath.ToSlash(rel)})
	}
}

func noReportConfig(*scenarios.Scenario) reports.Config { return reports.Config{} }

// TestRunNightsArchiveAndPrune drives three nights with a fake runner: each night's
// directory, manifest, summary and step summary; the exit codes (pass, fail, invalid);
// and --keep 2 pruning the first night while its history line stays.
func TestRunNightsArchiveAndPrune(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "a")
	step := filepath.Join(t.TempDir(), "step.md")
	var calls []RunRequest
	clock := time.Date(2026, 12, 1, 2, 17, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	cfg := Config{Archive: archive, Specs: []Spec{{Scenario: "x/pack.yaml", Duration: time.Minute}, {Scenario: "soak", Soak: true, Duration: time.Hour}}}
	night := func(sha string, codes map[string]int) *Result {
		cfg.SHA = sha
		res, err := Run(context.Background(), cfg, fakeRun(codes, &calls), noReportConfig, WithClock(now), WithKeep(2), WithStepSummary(step))
		require.NoError(t, err)
		clock = clock.Add(24 * time.Hour)
		return res
	}
	r1 := night("aaaaaaaa", nil)
	assert.Equal(t, "2026-12-01-aaaaaaa", r1.Night)
	assert.Equal(t, ExitPass, r1.Code)
	require.Len(t, calls, 2)
	assert.Equal(t, RunRequest{Scenario: "x/pack.yaml", Duration: time.Minute, OutDir: filepath.Join(archive, "nights", r1.Night, "pack"), History: filepath.Join(archive, HistoryFile), Label: "aaaaaaaa"}, calls[0])
	assert.Equal(t, time.Hour, calls[1].Duration)

	r2 := night("bbbbbbbb", map[string]int{"soak": 1})
	assert.Equal(t, ExitFail, r2.Code)
	r3 := night("cccccccc", map[string]int{"x/pack.yaml": 3})
	assert.Equal(t, ExitInfra, r3.Code)
	assert.Equal(t, []string{r1.Night}, r3.Pruned)

	nights, err := os.ReadDir(filepath.Join(archive, NightsDir))
	require.NoError(t, err)
	var names []string
	for _, n := range nights {
		names = append(names, n.Name())
	}
	assert.Equal(t, []string{r2.Night, r3.Night}, names)
	var m Result
	data, err := os.ReadFile(filepath.Join(archive, NightsDir, r3.Night, NightFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Equal(t, ExitInfra, m.Code)
	assert.Equal(t, "nights/"+r3.Night+"/soak", m.Runs[1].Dir)
	assert.True(t, m.Runs[1].Soak)

	hist, err := readHistory(filepath.Join(archive, HistoryFile))
	require.NoError(t, err)
	assert.Len(t, hist, 6, "a pruned night's history lines stay")
	page, err := os.ReadFile(filepath.Join(archive, reports.TrendFile))
	require.NoError(t, err)
	assert.NotContains(t, string(page), r1.Night+"/", "no link to a pruned night")
	summary, err := os.ReadFile(step)
	require.NoError(t, err)
	assert.Contains(t, string(summary), "## Nightly soak "+r1.Night+": PASS (exit 0)")
	assert.Contains(t, string(summary), "## Nightly soak "+r2.Night+": FAIL (exit 1)")
	assert.Contains(t, string(summary), "| soak (soak) | 1 | fail | none yet |")
}

// TestRunPreflight: nothing runs when a scenario does not load or two specs are one
// scenario; the error is ErrUsage and names each problem.
func TestRunPreflight(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "a")
	var calls []RunRequest
	load := func(s string, _ time.Duration) (*scenarios.Scenario, error) {
		if s == "bad" {
			return nil, errors.New("bad.yaml:3: workloads: must be set")
		}
		return &scenarios.Scenario{Name: "same"}, nil
	}
	for _, tc := range []struct {
		name  string
		specs []Spec
		want  []string
	}{
		{"does not load", []Spec{{Scenario: "ok"}, {Scenario: "bad"}}, []string{"bad.yaml:3: workloads: must be set"}},
		{"one name twice", []Spec{{Scenario: "a.yaml"}, {Scenario: "b.yaml"}}, []string{`a.yaml and b.yaml are both scenario "same"`}},
		{"nothing to run", nil, []string{"no scenario"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), Config{Archive: archive, Specs: tc.specs}, fakeRun(nil, &calls), noReportConfig, WithPreflight(load))
			require.ErrorIs(t, err, ErrUsage)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
			assert.Empty(t, calls)
			assert.NoDirExists(t, filepath.Join(archive, NightsDir))
		})
	}
}

// TestRunInterrupted: a night interrupted during its first run records the runs left as
// not run (exit 3) and still writes its manifest and the trend page.
func TestRunInterrupted(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls []RunRequest
	inner := fakeRun(nil, &calls)
	run := func(ctx context.Context, r RunRequest) (int, error) {
		code, err := inner(ctx, r)
		cancel() // the signal arrives while the first run ends
		return code, err
	}
	res, err := Run(ctx, Config{Archive: archive, SHA: "abcdef0", Specs: []Spec{{Scenario: "one"}, {Scenario: "two"}}}, run, noReportConfig)
	require.NoError(t, err)
	assert.Len(t, calls, 1)
	assert.Equal(t, ExitInfra, res.Code)
	assert.Equal(t, "not run: the night was interrupted", res.Runs[1].Error)
	assert.FileExists(t, filepath.Join(archive, NightsDir, res.Night, NightFile))
	assert.FileExists(t, filepath.Join(archive, reports.TrendFile))
}

// TestTrendShowsMalformedHistoryLines: a history line that does not parse (torn by a
// full disk, hand-edited) is skipped, but the trend page says so, as harness trend's
// does, rather than lose a night without a word.
func TestTrendShowsMalformedHistoryLines(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "a")
	require.NoError(t, os.MkdirAll(archive, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(archive, HistoryFile), []byte(`{"scenario":"pack","digest":"d","ti`+"\n"), 0o644))
	var calls []RunRequest
	res, err := Run(context.Background(), Config{Archive: archive, Specs: []Spec{{Scenario: "pack"}}}, fakeRun(nil, &calls), noReportConfig)
	require.NoError(t, err)
	assert.Equal(t, ExitPass, res.Code)
	page, err := os.ReadFile(filepath.Join(archive, reports.TrendFile))
	require.NoError(t, err)
	assert.Contains(t, string(page), "Skipped malformed history lines")
	assert.Contains(t, string(page), "line 1: ")
}
