package workload

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShardSplitIsAPartition: for every n, the shards' parts of a schedule are disjoint,
// their union is the whole schedule with the unsharded numbers and times, and the split
// does not depend on which shard computes it.
func TestShardSplitIsAPartition(t *testing.T) {
	sched := make([]time.Duration, 1000)
	for k := range sched {
		sched[k] = time.Duration(k) * time.Millisecond
	}
	for _, poisson := range []bool{false, true} {
		for _, n := range []int{1, 2, 3, 4, 7} {
			t.Run(fmt.Sprintf("poisson=%v n=%d", poisson, n), func(t *testing.T) {
				owner := map[uint64]int{}
				for i := 1; i <= n; i++ {
					s := Shard{Index: i, Count: n}
					part, seqs := s.pick(sched, poisson, rand.New(rand.NewPCG(1, 2)))
					if n == 1 {
						require.Nil(t, seqs)
						require.Equal(t, sched, part)
						owner[0] = 1
						continue
					}
					require.Len(t, seqs, len(part))
					for j, k := range seqs {
						assert.Equal(t, sched[k], part[j], "shard %d keeps the unsharded due time", i)
						_, dup := owner[k]
						require.False(t, dup, "request %d in two shards", k)
						owner[k] = i
					}
					// Each shard holds about its share (rate/n).
					assert.InDelta(t, len(sched)/n, len(part), float64(len(sched))/float64(n)*0.3)
				}
				if n > 1 {
					assert.Len(t, owner, len(sched), "the union is the whole schedule")
				}
			})
		}
	}
}

func TestShardOwnsRoundRobin(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		total := 0
		for i := 1; i <= n; i++ {
			total += Shard{Index: i, Count: n}.size(5)
		}
		assert.Equal(t, 5, total, "n=%d", n)
	}
	assert.Equal(t, 5, Shard{}.size(5), "the zero shard is the whole workload")
}
