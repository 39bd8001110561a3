package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countPacer sends n hits, all due at once.
type countPacer uint64

func (p countPacer) Pace(_ time.Duration, hits uint64) (time.Duration, bool) {
	return 0, hits >= uint64(p)
}
func (p countPacer) Rate(time.Duration) float64 { return 0 }

func TestAttack(t *testing.T) {
	for _, tc := range []struct {
		name                string
		n, workers, maxWork uint64
		wantPeak            int64 // the in-flight peak must not pass it (0: n)
	}{
		{name: "unbounded starts workers as needed", n: 200, workers: 4},
		{name: "max workers bounds the in-flight hits", n: 200, workers: 4, maxWork: 8, wantPeak: 8},
		{name: "initial workers above the cap are capped", n: 50, workers: 64, maxWork: 3, wantPeak: 3},
		{name: "one worker runs hits in order", n: 20, workers: 1, maxWork: 1, wantPeak: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu      sync.Mutex
				seen    = map[uint64]int{}
				order   []uint64
				cur     atomic.Int64
				peak    atomic.Int64
				release = make(chan struct{})
			)
			done := make(chan struct{})
			go func() {
				defer close(done)
				attack(context.Background(), countPacer(tc.n), tc.workers, tc.maxWork, func(seq uint64) {
					c := cur.Add(1)
					for p := peak.Load(); c > p && !peak.CompareAndSwap(p, c); p = peak.Load() {
					}
					mu.Lock()
					seen[seq]++
					order = append(order, seq)
					mu.Unlock()
					if seq < 8 {
						<-release // the first hits hold their worker: the loop must start more, or wait at the cap
					}
					cur.Add(-1)
				})
			}()
			// The first hits hold their workers until target of them are in flight: more
			// than the 4 initial workers unless a cap stops the loop starting more.
			target := int64(8)
			if tc.maxWork > 0 {
				target = min(target, int64(tc.maxWork))
			}
			for cur.Load() < target {
				time.Sleep(time.Millisecond)
			}
			close(release)
			<-done
			require.Len(t, seen, int(tc.n), "every hit once")
			for seq, k := range seen {
				require.Equal(t, 1, k, "hit %d", seq)
				require.Less(t, seq, tc.n)
			}
			require.GreaterOrEqual(t, peak.Load(), target)
			if tc.wantPeak > 0 {
				require.LessOrEqual(t, peak.Load(), tc.wantPeak)
			}
			if tc.maxWork == 1 {
				for i, seq := range order {
					require.Equal(t, uint64(i), seq)
				}
			}
		})
	}
}

func TestAttackStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	// A pacer that never stops: only the cancellation ends the attack.
	attack(ctx, countPacer(^uint64(0)), 2, 2, func(uint64) {
		if n.Add(1) == 100 {
			cancel()
		}
	})
	// Hits already taken by the two workers may still run after the cancel.
	require.GreaterOrEqual(t, n.Load(), int64(100))
	require.LessOrEqual(t, n.Load(), int64(103))
}
