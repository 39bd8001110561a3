package workload

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
	"pdsoak/traces"
)

// traceScenario parses a scenario replaying one shipped excerpt through the real
// loader (validation, defaults), as harness run does.
func traceScenario(t *testing.T, file, extra string) *scenarios.Scenario {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("../../scenarios/traces", file))
	require.NoError(t, err)
	yaml := fmt.Sprintf(`name: tr
duration: 10m
target: {url: "http://127.0.0.1:1"}
workloads:
  - name: tr
    type: trace
    trace: {file: %q%s}
`, abs, extra)
	sc, err := scenarios.Parse(filepath.Join(t.TempDir(), "tr.yaml"), []byte(yaml))
	require.NoError(t, err)
	return sc
}

// TestTraceReplaysExactCounts: every format sends exactly the requests the plan counts,
// each scheduled at the window start plus its (rescaled) trace arrival.
func TestTraceReplaysExactCounts(t *testing.T) {
	for _, tc := range []struct{ file, extra string }{
		{"mooncake-conversation.jsonl", ", rate: 4000, block_tokens: 8"},
		{"azure-conv.csv", ", speedup: 500, limit: 120"},
		{"burstgpt-synthetic.csv", ", rate: 5000, max_tokens: 4"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			sc := traceScenario(t, tc.file, tc.extra)
			plan := scenarios.Plan(sc)
			require.Len(t, plan.Workloads, 1)
			w, err := New(sc, 0)
			require.NoError(t, err)
			tw := w.(*Trace)
			require.Equal(t, plan.Workloads[0].Requests, len(tw.Sched), "plan = schedule")
			f := &fakeSender{}
			start := time.Now()
			st := w.Run(context.Background(), start, f)
			reqs := f.sorted()
			assert.Equal(t, len(tw.Sched), st.Requests)
			require.Len(t, reqs, len(tw.Sched), "requests in = requests scheduled")
			for k, r := range reqs {
				assert.Equal(t, fmt.Sprintf("tr-%06d", k), r.ID)
				assert.Equal(t, start.Add(tw.Sched[k].At), r.Scheduled, "scheduled at the trace's arrival")
				want := max(tw.Sched[k].Output, 1)
				if c := sc.Workloads[0].Trace.MaxTokens; c > 0 {
					want = min(want, c)
				}
				assert.Equal(t, want, r.MaxTokens)
				assert.Equal(t, traces.Scaled(tw.Sched[k], sc.Workloads[0].Trace.BlockTokens), r.PromptBytes)
			}
		})
	}
}

// TestTracePromptsShareTheTracesPrefixes: Mooncake requests whose hash ids agree on the
// first k blocks send prompts identical in their first k blocks.
func TestTracePromptsShareTheTracesPrefixes(t *testing.T) {
	sc := traceScenario(t, "mooncake-conversation.jsonl", ", block_tokens: 16")
	w, err := New(sc, 0)
	require.NoError(t, err)
	tw := w.(*Trace)
	a, b := tw.Request(0, time.Time{}), tw.Request(1, time.Time{})
	require.Equal(t, uint64(0), tw.Sched[0].Blocks[0])
	require.Equal(t, uint64(0), tw.Sched[1].Blocks[0])
	pa, pb := a.Messages[0].Content, b.Messages[0].Content
	assert.Equal(t, pa[:16], pb[:16], "block 0 is shared")
	assert.NotEqual(t, pa[16:32], pb[16:32], "block 1 differs")
	again := tw.Request(0, time.Time{})
	assert.Equal(t, pa, again.Messages[0].Content, "deterministic")
}

// TestTraceShardsPartitionTheSchedule: shards send disjoint parts whose union is the
// unsharded replay, request id for request id and scheduled offset for offset.
func TestTraceShardsPartitionTheSchedule(t *testing.T) {
	sc := traceScenario(t, "azure-conv.csv", ", speedup: 1000")
	whole := &fakeSender{}
	w, err := New(sc, 0)
	require.NoError(t, err)
	start := time.Now()
	w.Run(context.Background(), start, whole)
	want := map[string]time.Duration{}
	for _, r := range whole.sorted() {
		want[r.ID] = r.Scheduled.Sub(start)
	}
	got := map[string]time.Duration{}
	for i := 1; i <= 3; i++ {
		f := &fakeSender{}
		w, err := New(sc, 0, WithShard(Shard{Index: i, Count: 3}))
		require.NoError(t, err)
		w.Run(context.Background(), start, f)
		assert.InDelta(t, 100, len(f.reqs), 1, "shard %d holds a third", i)
		for _, r := range f.sorted() {
			_, dup := got[r.ID]
			require.False(t, dup, "%s in two shards", r.ID)
			got[r.ID] = r.Scheduled.Sub(start)
		}
	}
	assert.Equal(t, want, got)
}

// TestTraceStopsWithItsContext: a cancelled window sends nothing more.
func TestTraceStopsWithItsContext(t *testing.T) {
	sc := traceScenario(t, "azure-conv.csv", "")
	w, err := New(sc, 0)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &fakeSender{}
	assert.Equal(t, 0, w.Run(ctx, time.Now(), f).Requests)
	assert.Empty(t, f.reqs)
}

func TestTraceScenarioProblems(t *testing.T) {
	abs, err := filepath.Abs("../../scenarios/traces/azure-conv.csv")
	require.NoError(t, err)
	for _, tc := range []struct{ name, w, want string }{
		{"no trace", "type: trace", "workloads[0].trace: must be set"},
		{"missing file", "type: trace\n    trace: {file: nope.jsonl}", "workloads[0].trace.file: read trace"},
		{"bad format", fmt.Sprintf("type: trace\n    trace: {file: %q, format: mooncake}", abs), "azure-conv.csv:1: not a JSON object"},
		{"both rates", fmt.Sprintf("type: trace\n    trace: {file: %q, rate: 2, speedup: 3}", abs), "set rate or speedup, not both"},
		{"wrong type", fmt.Sprintf("type: burst\n    count: 3\n    trace: {file: %q}", abs), "only applies to type trace"},
		{"empty window", fmt.Sprintf("type: trace\n    trace: {file: %q, start: 1h}", abs), "no request of the trace falls in the workload's window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "name: x\nduration: 1m\nworkloads:\n  - name: w\n    " + tc.w + "\n"
			_, err := scenarios.Parse(filepath.Join(t.TempDir(), "x.yaml"), []byte(yaml))
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), tc.want), "%v", err)
		})
	}
}
