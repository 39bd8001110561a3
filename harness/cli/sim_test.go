package cli

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

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/server/gen"
	"pdsoak/sim"
)

// simFake is a minimal simulated target: every request streams three tokens 50ms
// apart, except ids containing "t002" when hang is set, which never answer.
type simFake struct {
	loop     *sim.Loop
	hang     bool
	inflight map[string]bool
	refuse   bool // CanModel refuses every fault
}

func (f *simFake) Submit(req *gen.Request, emit func(gen.Event)) (func(), error) {
	f.inflight[req.ID] = true
	if f.hang && strings.Contains(req.ID, "t002") {
		return func() { delete(f.inflight, req.ID) }, nil
	}
	stopped := false
	var step func(n int)
	step = func(n int) {
		if stopped {
			return
		}
		if n == 3 {
			delete(f.inflight, req.ID)
			emit(gen.Event{Done: true, Finish: "length", PromptTokens: len(req.Prompt), CompletionTokens: 3})
			return
		}
		emit(gen.Event{Tokens: []int{'x'}})
		f.loop.After(50*time.Millisecond, func() { step(n + 1) })
	}
	f.loop.After(20*time.Millisecond, func() { step(0) })
	return func() { stopped = true; delete(f.inflight, req.ID) }, nil
}

func (f *simFake) Requests() map[string][]gen.RequestInfo {
	var infos []gen.RequestInfo
	for id := range f.inflight {
		infos = append(infos, gen.RequestInfo{ID: id, Stage: "prealloc"})
	}
	return map[string][]gen.RequestInfo{"decode-0": infos}
}

func (f *simFake) Gauges() map[string]map[string]float64 {
	n := float64(len(f.inflight))
	return map[string]map[string]float64{"prefill-0": {"sglang:num_running_reqs": 0}, "decode-0": {"sglang:num_running_reqs": n}}
}

func (f *simFake) Fault(scenarios.Fault) (func(), error) { return func() {}, nil }
func (f *simFake) CanModel(fl scenarios.Fault) error {
	if f.refuse {
		return fmt.Errorf("fake: %s cannot be modelled: %w", fl.Type, sim.ErrNotModelled)
	}
	return nil
}

func simRunnerWith(hang bool) RunFunc { return simRunner(&simFake{hang: hang}) }

func simRunner(proto *simFake) RunFunc {
	return func(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) error {
		return sim.Run(ctx, sc, sim.Options{OutDir: opts.OutDir, Logger: opts.Logger, OnEvent: opts.OnEvent, Notes: opts.Notes,
			NewServer: func(l *sim.Loop, _ *scenarios.Scenario) (sim.Server, error) {
				return &simFake{loop: l, hang: proto.hang, refuse: proto.refuse, inflight: map[string]bool{}}, nil
			}})
	}
}

func TestRunSimFaultNotModelled(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "sim.yaml", strings.Replace(simScenario, "assertions:",
		"faults: [{name: kill, type: decode_crash, target: decode, at: 5s, for: 2s}]\nassertions:", 1))
	code, _, stderr := execute(t, []string{"run", file, "--sim", "--out", filepath.Join(dir, "out"), "-q"}, WithSimRunner(simRunner(&simFake{refuse: true})))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr, "harness: run failed: sim: fault kill (decode_crash): fake: decode_crash cannot be modelled: sim: not modelled")
}

const simScenario = `name: sim-cli
seed: 4
duration: 30s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: agents, type: agents, agents: 4, turns: 3, max_tokens: 3, think_time: 1s}
deadlines: {first_token: 2s, stall: 2s, total: 10s}
assertions: [no_silent_drops, valid_responses, no_leaks]
`

func TestRunSim(t *testing.T) {
	tests := []struct {
		name    string
		hang    bool
		code    int
		verdict reports.Verdict
	}{
		{name: "every request answered", code: ExitPass, verdict: reports.VerdictPass},
		{name: "the second turns hang", hang: true, code: ExitFail, verdict: reports.VerdictFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := writeFile(t, dir, "sim.yaml", simScenario)
			out := filepath.Join(dir, "out")
			// The real runner must not be called: it would start a server.
			real := WithRunner(func(context.Context, *scenarios.Scenario, RunOptions) error {
				t.Error("harness run --sim called the real runner")
				return nil
			})
			code, stdout, stderr := execute(t, []string{"run", file, "--sim", "--out", out}, real, WithSimRunner(simRunnerWith(tt.hang)))
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stdout, "against a simulated embedded reference")

			b, err := os.ReadFile(filepath.Join(out, reports.ResultsFile))
			require.NoError(t, err)
			var res map[string]any
			require.NoError(t, json.Unmarshal(b, &res))
			assert.Equal(t, "sim", res["mode"])
			assert.Equal(t, string(tt.verdict), res["verdict"])
			for _, f := range []string{ledger.EventsFile, reports.JUnitFile, reports.SummaryFile, reports.HTMLFile} {
				assert.FileExists(t, filepath.Join(out, f))
			}
			if tt.hang {
				assert.EqualValues(t, 4, res["silent_drops"])
				assert.Equal(t, map[string]any{"decode-0: prealloc": float64(4)}, res["drop_stages"])
			}

			// `harness report` recomputes the same verdict from the ledger.
			code, _, _ = execute(t, []string{"report", out})
			assert.Equal(t, tt.code, code)
		})
	}
}

func TestRunSimRefused(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "sim.yaml", simScenario)
	ext := writeFile(t, dir, "ext.yaml", strings.Replace(simScenario, "reference: {prefill: 1, decode: 1}", "target: {url: \"http://127.0.0.1:9\"}", 1))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "--target", args: []string{"run", file, "--sim", "--target", "http://127.0.0.1:9"},
			want: "harness: --sim: the target is the external http://127.0.0.1:9 (target.url or --target); --sim simulates the reference server only\n"},
		{name: "target.url", args: []string{"run", ext, "--sim"},
			want: "harness: --sim: the target is the external http://127.0.0.1:9 (target.url or --target); --sim simulates the reference server only\n"},
		{name: "--shard", args: []string{"run", file, "--sim", "--shard", "1/2"},
			want: "harness: --shard cannot be used with --sim: a simulated run is one process on one virtual clock (it needs no sharding)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			called := false
			code, _, stderr := execute(t, append(tt.args, "--out", out), WithSimRunner(func(context.Context, *scenarios.Scenario, RunOptions) error {
				called = true
				return nil
			}))
			assert.Equal(t, ExitUsage, code)
			assert.Equal(t, tt.want, stderr)
			assert.False(t, called)
			assert.NoDirExists(t, out)
		})
	}
}
