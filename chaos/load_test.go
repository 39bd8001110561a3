package chaos

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/metricnames"
)

// TestSaturationWaitProof: queue_saturation's proof from the client is a stream of a
// burst sent at once served to its end while another sent with it still had no first
// token. Requests merely in flight prove nothing (any server has some), nor does the
// tail of a concurrency-capped burst (a request started late has had no time).
func TestSaturationWaitProof(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		polls  []RunStats // the burst's statistics at each poll
		proved int        // the poll that proves it (-1: none)
	}{
		{"capped burst, one waited", map[string]any{"requests": 12, "concurrency": 3},
			[]RunStats{{Sent: 3}, {Sent: 12, Done: 11, QueuedBehind: 1}, {Sent: 12, Done: 11, QueuedBehind: 1}}, -1},
		{"the whole burst in flight", map[string]any{"requests": 10},
			[]RunStats{{Sent: 4}, {Sent: 10, Done: 2}, {Sent: 10, Done: 9}}, -1},
		{"the whole burst answered", map[string]any{"requests": 10},
			[]RunStats{{Sent: 4}, {Sent: 10, Done: 10, FirstTokens: 10}}, -1},
		{"uncapped: concurrency is the size", map[string]any{"requests": 10, "concurrency": 10},
			[]RunStats{{Sent: 4}, {Sent: 10, Done: 1, QueuedBehind: 6}}, 1},
		{"one waited behind a stream served to its end", map[string]any{"requests": 10},
			[]RunStats{{Sent: 10}, {Sent: 10, Done: 3, QueuedBehind: 1}}, 1},
		{"refusals prove it at once", map[string]any{"requests": 12, "concurrency": 3},
			[]RunStats{{Sent: 3, Done: 1, Rejected: 1}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEnv(t)
			f, err := New(spec("queue_saturation", "client", tc.params))
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, f.Apply(ctx, e))
			proved := -1
			for i, st := range tc.polls {
				e.lastRun().set(st)
				if f.Verify(ctx, e) == nil {
					proved = i
					break
				}
			}
			assert.Equal(t, tc.proved, proved)
			require.NoError(t, f.Revert(ctx, e))
		})
	}
}

// TestSaturationGaugeProof: a waiting-queue gauge above zero on the target process
// proves queue_saturation under the names real servers export, not only the reference
// server's: SGLang's sglang:num_queue_reqs and vLLM's vllm:num_requests_waiting. Without
// it a burst whose streams prove nothing (not streamed, or capped) leaves the fault
// unverified and the run invalid.
func TestSaturationGaugeProof(t *testing.T) {
	for _, gauge := range []string{"sglang:num_queue_reqs", "vllm:num_requests_waiting"} {
		t.Run(gauge, func(t *testing.T) {
			e := newFakeEnv(t)
			e.members["prefill"] = []string{"prefill"}
			e.scrape["prefill"] = map[string]float64{gauge: 0}
			f, err := New(spec("queue_saturation", "prefill", map[string]any{"requests": 12, "concurrency": 3}))
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, f.Apply(ctx, e))
			e.lastRun().set(RunStats{Sent: 3})
			require.Error(t, f.Verify(ctx, e), "an empty queue proves nothing")
			e.mu.Lock()
			e.scrape["prefill"] = map[string]float64{gauge: 5}
			e.mu.Unlock()
			assert.NoError(t, f.Verify(ctx, e))
			require.NoError(t, f.Revert(ctx, e))
		})
	}
}

// TestTransitQueuesProveNothing: SGLang's PD queues that every disaggregated request
// passes through (prefill bootstrap, inflight, decode prealloc and transfer) are above
// zero under any load, the pool empty or not, so neither queue_saturation nor
// kv_pool_exhaustion is proved by them. Both were, before: a burst of a few requests on
// an idle SGLang showed the bootstrap queue at 1 and the prealloc queue at 1.
func TestTransitQueuesProveNothing(t *testing.T) {
	for _, fault := range []string{"queue_saturation", "kv_pool_exhaustion"} {
		for _, gauge := range metricnames.TransitQueues {
			t.Run(fault+"/"+gauge, func(t *testing.T) {
				e := newFakeEnv(t)
				e.members["decode"] = []string{"decode"}
				e.scrape["decode"] = map[string]float64{gauge: 3, "sglang:token_usage": 0.3}
				f, err := New(spec(fault, "decode", map[string]any{"requests": 12, "concurrency": 3}))
				require.NoError(t, err)
				ctx := context.Background()
				require.NoError(t, f.Apply(ctx, e))
				e.lastRun().set(RunStats{Sent: 3})
				require.Error(t, f.Verify(ctx, e), "%s=3 shows traffic, not pressure", gauge)
				require.NoError(t, f.Revert(ctx, e))
			})
		}
	}
}

// TestExhaustionUsageProof: kv_pool_exhaustion is proved by the KV pool's usage at or
// above min_usage under SGLang's name and vLLM's (vllm:kv_cache_usage_perc, a fraction:
// "1 means 100 percent usage", vllm/v1/metrics/loggers.py; vllm:gpu_cache_usage_perc
// before it), and not below it.
func TestExhaustionUsageProof(t *testing.T) {
	for _, gauge := range []string{"sglang:token_usage", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} {
		t.Run(gauge, func(t *testing.T) {
			e := newFakeEnv(t)
			e.members["decode"] = []string{"decode"}
			e.scrape["decode"] = map[string]float64{gauge: 0.85}
			f, err := New(spec("kv_pool_exhaustion", "decode", map[string]any{"min_usage": 0.9}))
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, f.Apply(ctx, e))
			e.lastRun().set(RunStats{Sent: 64, Done: 10})
			require.Error(t, f.Verify(ctx, e), "usage below min_usage proves nothing")
			e.mu.Lock()
			e.scrape["decode"] = map[string]float64{gauge: 0.97}
			e.mu.Unlock()
			assert.NoError(t, f.Verify(ctx, e))
			require.NoError(t, f.Revert(ctx, e))
		})
	}
}

// TestRetractionProofNeedsAChange: sglang:num_retracted_reqs counts the retractions of
// SGLang's last stats interval and a drained server re-publishes it unchanged, so a
// value above zero that was already there at Apply (a retraction long before the burst)
// does not prove kv_pool_exhaustion; a new value does.
func TestRetractionProofNeedsAChange(t *testing.T) {
	e := newFakeEnv(t)
	e.members["decode"] = []string{"decode"}
	e.scrape["decode"] = map[string]float64{"sglang:num_retracted_reqs": 2, "sglang:token_usage": 0.1}
	f, err := New(spec("kv_pool_exhaustion", "decode", nil))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.Apply(ctx, e))
	e.lastRun().set(RunStats{Sent: 64, Done: 3})
	require.Error(t, f.Verify(ctx, e), "a stale retraction count proves nothing")
	e.mu.Lock()
	e.scrape["decode"] = map[string]float64{"sglang:num_retracted_reqs": 5, "sglang:token_usage": 0.1}
	e.mu.Unlock()
	require.NoError(t, f.Verify(ctx, e))
	assert.Contains(t, f.(Evidencer).Evidence(), "sglang:num_retracted_reqs=5")
	require.NoError(t, f.Revert(ctx, e))
}
