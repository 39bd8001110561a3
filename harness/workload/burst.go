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

// Requests are the burst's requests (this shard's), all scheduled at at: what the real
// driver (Run) and the simulator send at the window's start.
func (b *Burst) Requests(at time.Time) []*Req {
	n := b.Spec.Count
	if n <= 0 {
		n = DefaultBurstCount
	}
	var out []*Req
	for i := 0; i < n; i++ {
		if b.Shard.owns(uint64(i)) { // else another shard's request
			out = append(out, b.single(uint64(i), at))
		}
	}
	return out
}

// Run implements Workload.
func (b *Burst) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, _ := b.window(start)
	if !SleepCtx(ctx, time.Until(from)) {
		return Stats{}
	}
	reqs := b.Requests(from)
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Go(func() { s.Send(ctx, r) })
	}
	wg.Wait()
	return Stats{Requests: len(reqs)}
}
