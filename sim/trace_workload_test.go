package sim

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/metricnames"
	"pdsoak/scenarios"
	"pdsoak/traces"
)

// TestMooncakeTraceCacheHitRate replays the shipped Mooncake excerpt on the simulated
// reference topology (the real scheduler and its radix cache on a virtual clock): every
// trace request is sent and answered, and prefill's sglang:cache_hit_rate comes close
// to the trace's own prefix reuse (traces.Reuse). A real run of the same scenario
// measured the same final rate (0.0579, against the trace's 0.0593).
func TestMooncakeTraceCacheHitRate(t *testing.T) {
	sc, err := scenarios.Load("trace-mooncake")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
	evs, _, err := ledger.ReadFile(filepath.Join(dir, ledger.EventsFile))
	require.NoError(t, err)
	done, rate := 0, -1.0
	for _, ev := range evs {
		switch {
		case ev.Type == ledger.EventDone:
			done++
			assert.Equal(t, ledger.OutcomeOK, ev.Outcome, ev.RequestID)
		case ev.Type == ledger.EventSample && ev.Source == "prefill-0":
			if v, ok := ev.Metrics[metricnames.CacheHitRate]; ok {
				rate = v
			}
		}
	}
	assert.Equal(t, 200, done, "requests in = requests scheduled")
	data, err := os.ReadFile("../scenarios/traces/mooncake-conversation.jsonl")
	require.NoError(t, err)
	tr, err := traces.Parse("m", data, "")
	require.NoError(t, err)
	hit, total := traces.Reuse(tr.Requests)
	own := float64(hit) / float64(total)
	t.Logf("prefill cache hit rate %.4f, the trace's own reuse %.4f", rate, own)
	assert.InDelta(t, own, rate, 0.01)
}
