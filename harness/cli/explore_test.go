package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/explore"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

const exploreScenario = `name: wedge
duration: 20s
reference:
  prefill: 1
  decode: 1
  semantics: sglang
workloads:
  - {name: agents, type: agents, agents: 30, turns: 3, max_tokens: 8}
assertions: [no_silent_drops, valid_responses]
faults:
  - {name: kill, type: decode_crash, target: decode-0, at: 5s, for: 2s}
explore:
  agents: [5, 40]
  flags:
    decode:
      --max-total-tokens: [%s]
`

// wedgeSim is a stand-in for the simulator: it writes a real ledger whose requests
// after the first turn are silently dropped in decode's prealloc queue when decode's
// pool is under 1000 tokens and more than 8 agents share it.
func wedgeSim(_ context.Context, sc *scenarios.Scenario, outDir string) error {
	mtt := 1 << 20
	for _, a := range sc.Reference.DecodeArgs {
		if v, ok := strings.CutPrefix(a, "--max-total-tokens="); ok {
			mtt, _ = strconv.Atoi(v)
		}
	}
	w, err := ledger.Create(filepath.Join(outDir, ledger.EventsFile), nil)
	if err != nil {
		return err
	}
	w.Emit(ledger.Event{Time: at(0), Type: ledger.EventRunStart, Scenario: sc.Name, Seed: sc.Seed})
	wl := sc.Workloads[0]
	for a := 1; a <= wl.Agents; a++ {
		for turn := 1; turn <= wl.Turns; turn++ {
			id := fmt.Sprintf("a%d-t%d", a, turn)
			s := at(float64(a*10 + turn))
			w.Emit(ledger.Event{Time: s, Type: ledger.EventScheduled, RequestID: id, Workload: wl.Name})
			done := ledger.Event{Time: s.Add(time.Second), Type: ledger.EventDone, RequestID: id, Workload: wl.Name, Scheduled: &s, Outcome: ledger.OutcomeOK, E2E: 1, TTFT: 0.1}
			if mtt < 1000 && wl.Agents > 8 && turn >= 2 {
				done.Outcome, done.TTFT, done.Age = ledger.OutcomeDeadlineExceeded, 0, 30
				done.ServerDebug = json.RawMessage(`{"sources":[{"process":"decode-0","entries":[{"stage":"prealloc"}]}]}`)
			}
			w.Emit(done)
		}
	}
	w.Emit(ledger.Event{Time: at(1000), Type: ledger.EventRunEnd})
	return w.Close()
}

func writeScenario(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wedge.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

func TestExploreFindsAndShrinks(t *testing.T) {
	path := writeScenario(t, fmt.Sprintf(exploreScenario, "512, 65536"))
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Execute(context.Background(), []string{"explore", path, "--runs", "80", "--parallel", "2", "--seed", "5", "--out", out},
		&stdout, &stderr, WithExploreRunner(wedgeSim))
	require.Equal(t, ExitFail, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "80 runs")
	assert.Contains(t, stdout.String(), "no_silent_drops@decode:prealloc")
	assert.Contains(t, stderr.String(), "explore: shrinking no_silent_drops@decode:prealloc")

	var rep explore.Report
	raw, err := os.ReadFile(filepath.Join(out, explore.ReportFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rep))
	require.Len(t, rep.Signatures, 1)
	sh := rep.Signatures[0].Shrunk
	require.NotNil(t, sh)
	assert.True(t, sh.Reproduced)
	shrunk := filepath.Join(out, sh.File)
	data, err := os.ReadFile(shrunk)
	require.NoError(t, err)
	assert.Contains(t, string(data), "harness explore "+path+" --parallel=2 --runs=80 --seed=5")
	assert.Contains(t, string(data), "--max-total-tokens=999")

	// The shrunk file passes `harness validate` (the strict loader, the chaos registry)
	// and, run again on the stand-in simulator, fails.
	stdout.Reset()
	stderr.Reset()
	require.Equal(t, ExitPass, Execute(context.Background(), []string{"validate", shrunk}, &stdout, &stderr), stderr.String())
	sc, err := scenarios.Load(shrunk)
	require.NoError(t, err)
	assert.Equal(t, 9, sc.Workloads[0].Agents)
	assert.Equal(t, rep.Signatures[0].Seed, sc.Seed)
}

func TestExploreNoFailure(t *testing.T) {
	path := writeScenario(t, fmt.Sprintf(exploreScenario, "2000, 4000"))
	var stdout, stderr bytes.Buffer
	code := Execute(context.Background(), []string{"explore", path, "--runs", "20", "--out", t.TempDir(), "-q"},
		&stdout, &stderr, WithExploreRunner(wedgeSim))
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "no failure found")
	assert.Contains(t, stdout.String(), "20 pass")
	assert.Empty(t, stderr.String(), "-q prints no progress")
}

func TestExploreBadInput(t *testing.T) {
	good := fmt.Sprintf(exploreScenario, "512, 65536")
	tests := []struct {
		name string
		text string
		args []string
		want string
	}{
		{"bad range", strings.Replace(good, "agents: [5, 40]", "agents: [40, 5]", 1), nil, "wedge.yaml:13: explore.agents: the low bound (40) must not exceed the high bound (5)"},
		{"unknown key", strings.Replace(good, "agents: [5, 40]", "agent: [5, 40]", 1), nil, `wedge.yaml:13: explore.agent: unknown field (did you mean "agents"?)`},
		{"external target", strings.Replace(good, "faults:\n  - {name: kill, type: decode_crash, target: decode-0, at: 5s, for: 2s}\n", "", 1) + "target: {url: http://127.0.0.1:1}\n",
			nil, "wedge.yaml:15: target.url: explore runs only under simulation"},
		{"negative runs", good, []string{"--runs", "-1"}, "--runs must be ≥ 0"},
		{"bad semantics", good, []string{"--semantics", "lax"}, `reference.semantics: must be strict or sglang, got "lax"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeScenario(t, tc.text)
			var stdout, stderr bytes.Buffer
			args := append([]string{"explore", path, "--out", t.TempDir()}, tc.args...)
			code := Execute(context.Background(), args, &stdout, &stderr, WithExploreRunner(wedgeSim))
			assert.Equal(t, ExitUsage, code)
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, ExitUsage, Execute(context.Background(), []string{"explore"}, &stdout, &stderr))
}
