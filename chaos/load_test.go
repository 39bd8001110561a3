package chaos

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSaturationInFlightProof: queue_saturation's in-flight proof is the whole burst
// sent at once and still in flight. The tail of a concurrency-capped burst (a fast
// server's last straggler, which proved a fast server saturated on a loaded machine)
// is no proof.
func TestSaturationInFlightProof(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		polls  []RunStats // the burst's statistics at each poll
		proved int        // the poll that proves it (-1: none)
	}{
		{"capped burst's straggler", map[string]any{"requests": 12, "concurrency": 3},
			[]RunStats{{Sent: 3}, {Sent: 12, Done: 11}, {Sent: 12, Done: 11}, {Sent: 12, Done: 11}}, -1},
		{"capped burst's last window", map[string]any{"requests": 12, "concurrency": 3},
			[]RunStats{{Sent: 12, Done: 9}, {Sent: 12, Done: 9}, {Sent: 12, Done: 9}}, -1},
		{"uncapped: concurrency is the size", map[string]any{"requests": 10, "concurrency": 10},
			[]RunStats{{Sent: 4}, {Sent: 10, Done: 9}}, 1},
		{"the whole burst answered", map[string]any{"requests": 10},
			[]RunStats{{Sent: 4}, {Sent: 10, Done: 10}}, -1},
		{"the whole burst sent, some still in flight", map[string]any{"requests": 10},
			[]RunStats{{Sent: 4}, {Sent: 10, Done: 2}}, 1},
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
