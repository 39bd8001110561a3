package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/nightly"
	"pdsoak/reports"
)

// nightEnv is a short sglang-pd night on the reference server: the pack's deadlines and
// recovery bounds scaled to a 15 s window (as TestSGLangPackOnReferenceServer does).
var nightEnv = []string{
	"PDSOAK_SEMANTICS=strict", "START_TIMEOUT=60s", "AGENTS=8", "TURNS=4", "MAX_TOKENS=8", "PROMPT_TOKENS=32",
	"TOOL_RESULT_BYTES=64", "THINK_TIME=200ms", "TOOL_LATENCY=100ms",
	"FIRST_TOKEN_DEADLINE=8s", "STALL_DEADLINE=8s", "TOTAL_DEADLINE=12s", "DRAIN_TIMEOUT=15s",
	"LEAK_TIMEOUT=10s", "RECOVERY_WITHIN=10s", "RECOVERY_THRESHOLD=0.1",
	"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=3", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT=3",
	"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL=", "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE=",
}

// selfRun runs this test binary as the harness in a subprocess (its own environment,
// its own signal handling), bounded by timeout, and returns its exit code and output.
func selfRun(t *testing.T, env []string, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	return selfRunDir(t, "", env, timeout, args...)
}

// selfRunDir is selfRun with the working directory dir ("" : the test's).
func selfRunDir(t *testing.T, dir string, env []string, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(append(os.Environ(), selfExecEnv+"=1", StepSummaryEnv+"="), env...)
	cmd.Dir = dir
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	require.NoError(t, ctx.Err(), "harness %s did not end within %s\n%s", strings.Join(args, " "), timeout, out.String())
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("harness %s: %v\n%s", strings.Join(args, " "), err, out.String())
	return 0, ""
}

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

// TestNightlyTwoNightsOnReference runs `harness nightly --reference` twice, as two
// nights of two commits, on the reference server: the SGLang PD pack (launched through
// SGLANG_SERVER / SGLANG_ROUTER = this binary's pdserver, its kill and partition faults)
// for 15 s and the smoke scenario as the soak. It checks the archive layout, the
// manifest, the history lines, the trend page (each row links its own night's report,
// and every link resolves to a file in the archive), the comparison of night 2 against
// night 1 and the exit codes (night 1: 0; night 2: 1 exactly when a run regressed or
// failed; a scenario that does not load: 2 and nothing run).
func TestNightlyTwoNightsOnReference(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nights on the reference server")
	}
	archive := filepath.Join(t.TempDir(), "archive")
	pack := filepath.Join("..", "..", "scenarios", "targets", "sglang-pd.yaml")
	step := filepath.Join(t.TempDir(), "step-summary.md")
	night := func(sha string) (int, string) {
		return selfRun(t, append(append([]string(nil), nightEnv...), StepSummaryEnv+"="+step), 4*time.Minute, "nightly", "--reference", "--archive", archive, "--sha", sha,
			"--duration", "15s", pack, "--soak", "smoke", "--soak-duration", "4s", "--tolerance", "200%")
	}
	code1, out1 := night("1111111aaaa")
	require.Equal(t, 0, code1, "night 1\n%s", out1)
	code2, out2 := night("2222222bbbb")
	t.Logf("night 2 exit %d\n%s", code2, out2)

	nights, err := os.ReadDir(filepath.Join(archive, nightly.NightsDir))
	require.NoError(t, err)
	require.Len(t, nights, 2)
	today := time.Now().UTC().Format("2006-01-02")
	names := []string{nights[0].Name(), nights[1].Name()}
	sort.Strings(names)
	assert.Equal(t, []string{today + "-1111111", today + "-2222222"}, names)

	var m1, m2 nightly.Result
	readJSON(t, filepath.Join(archive, nightly.NightsDir, names[0], nightly.NightFile), &m1)
	readJSON(t, filepath.Join(archive, nightly.NightsDir, names[1], nightly.NightFile), &m2)
	for _, m := range []nightly.Result{m1, m2} {
		require.Len(t, m.Runs, 2, "%+v", m)
		assert.Equal(t, "sglang-pd", m.Runs[0].Scenario)
		assert.Equal(t, "smoke", m.Runs[1].Scenario)
		assert.True(t, m.Runs[1].Soak)
		for _, r := range m.Runs {
			assert.Equal(t, "nights/"+m.Night+"/"+r.Scenario, r.Dir)
			for _, f := range []string{reports.HTMLFile, reports.ResultsFile, reports.SummaryFile, "events.jsonl", "scenario.json"} {
				assert.FileExists(t, filepath.Join(archive, r.Dir, f))
			}
		}
		assert.FileExists(t, filepath.Join(archive, nightly.NightsDir, m.Night, nightly.SummaryFile))
	}
	// Night 1 had nothing to compare with; night 2 compared each run with night 1.
	assert.Equal(t, 0, m1.Code)
	for _, r := range m1.Runs {
		assert.Equal(t, 0, r.Code, r.Scenario)
		assert.Empty(t, r.Baselines, r.Scenario)
	}
	wantCode := 0
	for _, r := range m2.Runs {
		require.Len(t, r.Baselines, 1, "%s: one baseline night", r.Scenario)
		b := r.Baselines[0]
		assert.Equal(t, m1.Night, b.Night)
		assert.Equal(t, "nights/"+m1.Night+"/"+r.Scenario, b.Dir)
		if len(b.Refused) > 0 {
			// Night 1's machine was busy (a loaded CI host): not a bar, so no comparison.
			require.Len(t, b.Refused, 1, r.Scenario)
			assert.Contains(t, b.Refused[0], "its run was contended: ", "same reference server both nights: refused only for contention")
			assert.Equal(t, nightly.CompareNone, r.Comparison, r.Scenario)
			if r.Code == 1 {
				wantCode = 1
			} else if r.Code != 0 && wantCode == 0 {
				wantCode = 3
			}
			continue
		}
		// One pooled comparison per run, its state recorded.
		assert.Equal(t, "nights/"+m2.Night+"/"+r.Scenario+"/compare/compare.html", r.Compare)
		assert.FileExists(t, filepath.Join(archive, r.Compare))
		assert.Contains(t, []nightly.CompareState{nightly.CompareOK, nightly.CompareRegressed, nightly.CompareInconclusive}, r.Comparison, r.Scenario)
		assert.Equal(t, r.Comparison == nightly.CompareRegressed, r.Regressed)
		assert.Equal(t, r.Comparison == nightly.CompareInconclusive, len(r.Contended)+len(r.Invalid) > 0, "inconclusive says which run was contended or invalid")
		switch {
		case r.Regressed || r.Code == 1:
			wantCode = 1
		case r.Comparison == nightly.CompareInconclusive && wantCode == 0:
			wantCode = 3 // a contended machine or an invalid run: not a regression, not silent
		default:
			assert.Equal(t, 0, r.Code, r.Scenario)
		}
	}
	assert.Equal(t, wantCode, code2, "night 2's exit code")
	assert.Equal(t, code2, m2.Code)

	// The step summary: one section per night, each run's summary once (the runs do not
	// append their own as well).
	summary, err := os.ReadFile(step)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(summary), "## Nightly soak "), "%s", summary)
	assert.Contains(t, string(summary), "## Nightly soak "+m1.Night+": PASS (exit 0)")
	assert.Equal(t, 2, strings.Count(string(summary), "\n# sglang-pd: "), "each night's sglang-pd summary.md once")

	// History: one line per run, each pointing at its own night.
	f, err := os.Open(filepath.Join(archive, nightly.HistoryFile))
	require.NoError(t, err)
	entries, problems, err := reports.ReadHistory(f)
	f.Close()
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Len(t, entries, 4)
	dirs := map[string]bool{}
	for _, e := range entries {
		dirs[e.Dir] = true
		assert.Equal(t, nightly.NightOf(e), map[bool]string{true: m1.Night, false: m2.Night}[strings.HasPrefix(e.Label, "1111111")])
	}
	assert.Len(t, dirs, 4, "every line its own directory")

	// The trend page: one link per run, each to its own night's report, all resolving.
	page, err := os.ReadFile(filepath.Join(archive, reports.TrendFile))
	require.NoError(t, err)
	var links []string
	for _, m := range hrefRE.FindAllStringSubmatch(string(page), -1) {
		links = append(links, m[1])
		assert.FileExists(t, filepath.Join(archive, filepath.FromSlash(m[1])), "trend link %s", m[1])
	}
	sort.Strings(links)
	var want []string
	for _, m := range []nightly.Result{m1, m2} {
		for _, r := range m.Runs {
			want = append(want, r.Dir+"/"+reports.HTMLFile)
		}
	}
	sort.Strings(want)
	assert.Equal(t, want, links)

	// A night whose scenario does not load runs nothing: exit 2, no third night.
	code3, out3 := selfRun(t, nightEnv, time.Minute, "nightly", "--reference", "--archive", archive, "--sha", "3333333", pack, "no-such-scenario")
	assert.Equal(t, 2, code3, out3)
	assert.Contains(t, out3, "no-such-scenario")
	nights, err = os.ReadDir(filepath.Join(archive, nightly.NightsDir))
	require.NoError(t, err)
	assert.Len(t, nights, 2)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, v), path)
}
