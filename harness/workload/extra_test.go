package workload

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

// TestExtras: the requests a fault's extra load sends, in both drivers: n of them,
// numbered in order, one schedule, the window clamped to n, cancel-after on each.
func TestExtras(t *testing.T) {
	sc := &scenarios.Scenario{Seed: 7}
	sc.Target.Model = "m"
	c := Extra(sc, scenarios.Workload{PromptTokens: 8}, "w-burst1")
	at := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct{ n, conc, window int }{{5, 2, 2}, {5, 0, 5}, {3, 9, 3}, {0, 4, 0}, {-1, 4, 0}} {
		x := NewExtras(c, tc.n, tc.conc, 3, at)
		assert.Equal(t, tc.window, x.Window(), "n=%d conc=%d", tc.n, tc.conc)
		for i := range max(tc.n, 0) {
			r := x.Next()
			require.NotNil(t, r)
			assert.Equal(t, fmt.Sprintf("w-burst1-%06d", i), r.ID)
			want := c.Single(uint64(i), at)
			want.CancelAfterTokens = 3
			assert.Equal(t, want, r, "the request Single builds, cancelling after 3 tokens")
		}
		assert.Nil(t, x.Next(), "n=%d: no more", tc.n)
	}
}
