package workload

import (
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// Shard is the part of every workload one harness process runs: shard Index (1-based)
// of Count. The zero value (or Count 1) is the whole workload. Every split is a pure
// function of the scenario and seed, so the shards are disjoint and their union is the
// unsharded run, request id for request id.
type Shard struct {
	Index, Count int
}

func (s Shard) whole() bool { return s.Count <= 1 }

// owns reports whether this shard runs item k (0-based) of a round-robin split:
// agent sessions, burst requests, probe requests.
func (s Shard) owns(k uint64) bool {
	return s.whole() || k%uint64(s.Count) == uint64(s.Index-1)
}

// size is how many of n round-robin items this shard owns.
func (s Shard) size(n int) int {
	c := 0
	for k := 0; k < n; k++ {
		if s.owns(uint64(k)) {
			c++
		}
	}
	return c
}

// pick splits an open-loop schedule: it returns this shard's due times and the
// unsharded sequence number of each. Deterministic pacers are split round-robin, so each
// shard keeps an even rate/n; a Poisson schedule is thinned at random with a
// generator derived from the scenario seed and workload, each arrival going to one
// shard, so each shard's arrivals are again Poisson at rate/n (the thinning property)
// and the union is the unsharded schedule.
func (s Shard) pick(sched []time.Duration, poisson bool, rng *rand.Rand) ([]time.Duration, []uint64) {
	if s.whole() {
		return sched, nil
	}
	var out []time.Duration
	var seqs []uint64
	for k, at := range sched {
		owner := k % s.Count
		if poisson {
			owner = rng.IntN(s.Count)
		}
		if owner == s.Index-1 {
			out = append(out, at)
			seqs = append(seqs, uint64(k))
		}
	}
	return out, seqs
}

// shardKey derives the thinning generator's stream from the workload name.
func shardKey(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte("shard:" + name))
	return h.Sum64()
}
