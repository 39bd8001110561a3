package radixcache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzOperations drives a cache with a byte-coded sequence of matches, locks, inserts,
// unlocks and evictions, as a scheduler would (pages come from a counter, a locked
// prefix is never evicted), and checks the tree's invariants after every step: counts
// agree with the nodes, no page is in two nodes, a matched prefix's pages are never
// handed out by Evict while it is locked, and after every unlock the tree drains.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{2, 2, 2, 0, 0, 4, 4, 1, 1, 3, 3})
	f.Add([]byte("the quick brown fox"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := New(2)
		next := int32(1)
		var held []Match
		locked := map[int32]int{}
		seq := func(b byte) []int { // a few shared shapes: prefixes of one of 3 sequences
			base := [][]int{{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 9, 9, 9, 9}, {5, 5, 6, 6, 7, 7}}[int(b)%3]
			return base[:2+int(b/3)%(len(base)-1)]
		}
		for i, op := range ops {
			switch op % 5 {
			case 0: // match and lock
				m := c.Match(seq(op / 5))
				c.Lock(m)
				held = append(held, m)
				for _, p := range m.Pages {
					locked[p]++
				}
			case 1: // unlock the oldest
				if len(held) > 0 {
					c.Unlock(held[0])
					for _, p := range held[0].Pages {
						locked[p]--
					}
					held = held[1:]
				}
			case 2: // a finished request inserts fresh pages for its sequence
				s := seq(op / 5)
				pages := make([]int32, len(s)/c.PageSize())
				for k := range pages {
					pages[k], next = next, next+1
				}
				dup := c.Insert(s, pages)
				require.LessOrEqual(t, len(dup), len(pages))
			case 3, 4: // evict
				for _, p := range c.Evict(int(op/5)%4 + 1) {
					require.Zero(t, locked[p], "op %d: evicted page %d of a locked prefix", i, p)
				}
			}
			require.NoError(t, c.Check(), "op %d", i)
		}
		for _, m := range held {
			c.Unlock(m)
		}
		require.Zero(t, c.Stats().LockedNodes)
		c.Evict(1 << 20)
		require.Zero(t, c.Stats().CachedPages, "every unlocked page is evictable")
	})
}
