package scheduler

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBootstrapFreezeAtRate: decode's prealloc window holds MaxRunningRequests (2)
// requests. A trickle within the window preallocates either way; a burst of more rooms
// than the window holds freezes prealloc under the bug (no transfer is ever started, so
// no room registers with prefill), and drains two at a time without it.
func TestBootstrapFreezeAtRate(t *testing.T) {
	tests := []struct {
		name    string
		bug     bool
		arrive  int
		wantNow int // transfers started by the first plan
		frozen  bool
	}{
		{"bug, burst past the window", true, 3, 0, true},
		{"bug, within the window", true, 2, 2, false},
		{"no bug, burst past the window", false, 3, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var bugs []Bug
			if tc.bug {
				bugs = append(bugs, BugBootstrapFreezeAtRate)
			}
			c := bugConfig(RoleDecode, bugs...)
			c.MaxRunningRequests = 2
			s := mustNew(t, c)
			for i := range tc.arrive {
				_, err := s.Arrive(t0, req(fmt.Sprint("r", i), 4, 2, uint64(i+1)))
				require.NoError(t, err)
			}
			rd := s.Ready(t0)
			require.Len(t, rd.Transfers, tc.wantNow)
			// Deliver the KV of every transfer started and run every batch planned,
			// until the scheduler has nothing left to do: a frozen window never starts
			// another transfer.
			started := 0
			for range 500 {
				for _, tr := range rd.Transfers {
					started++
					require.True(t, s.Received(t0, tr.Room, 7, nil))
				}
				if rd.Batch != nil {
					out := make([]int, len(rd.Batch))
					for i := range out {
						out[i] = 7
					}
					s.StepDone(t0, out, nil)
				} else if len(rd.Transfers) == 0 {
					break
				}
				rd = s.Ready(t0)
			}
			if tc.frozen {
				assert.Zero(t, started, "a frozen window started a transfer")
				assert.Equal(t, tc.arrive, s.Live())
				for i := range tc.arrive {
					assert.Equal(t, string(StagePrealloc), stageOf(s, fmt.Sprint("r", i)))
				}
				return
			}
			assert.Equal(t, tc.arrive, started)
			assert.Zero(t, s.Live(), "every request finishes: %v", s.Requests(t0))
		})
	}
}
