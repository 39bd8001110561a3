package workload

import (
	"context"
	"sync"
	"time"
)

// DefaultBurstCount is the size of a burst whose count is unset.
const DefaultBurstCount = 50

// Burst sends Count requests scheduled at the same instant, the start of its window.
type Burst struct {
	Common
}

// Run implements Workload.
func (b *Burst) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, _ := b.window(start)
	if !SleepCtx(ctx, time.Until(from)) {
		return Stats{}
	}
	n := b.Spec.Count
	if n <= 0 {
		n = DefaultBurstCount
	}
	var wg sync.WaitGroup
	sent := 0
	for i := 0; i < n; i++ {
		if !b.Shard.owns(uint64(i)) {
			continue // another shard's request
		}
		sent++
		wg.Add(1)
		go func(seq uint64) {
			defer wg.Done()
			s.Send(ctx, b.single(seq, from))
		}(uint64(i))
	}
	wg.Wait()
	return Stats{Requests: sent}
}
