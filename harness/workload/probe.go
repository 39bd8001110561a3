package workload

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Probe sends the same Count greedy prompts (temperature 0) once per Interval through
// its window, each round's prompts at once. A correct server answers a probe the same
// way every time; consistent_outputs compares the answers.
type Probe struct {
	Common
}

// Run implements Workload.
func (p *Probe) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, to := p.window(start)
	n, every := max(p.Spec.Count, 1), p.Spec.Interval.D()
	if every <= 0 {
		every = time.Second
	}
	sent := 0
	for round := 0; ; round++ {
		at := from.Add(time.Duration(round) * every)
		if !at.Before(to) || !SleepCtx(ctx, time.Until(at)) {
			break
		}
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			if !p.Shard.owns(uint64(round*n + i)) {
				continue // another shard's probe
			}
			r := p.probe(i, round, at)
			sent++
			wg.Go(func() { s.Send(ctx, r) })
		}
		wg.Wait()
	}
	return Stats{Requests: sent}
}

// probe builds round's request of prompt i: the prompt depends on i only.
func (p *Probe) probe(i, round int, at time.Time) *Req {
	r := p.single(uint64(i), at)
	r.ID = fmt.Sprintf("%s-p%d-r%03d", p.Spec.Name, i, round)
	r.Temperature = 0
	r.Probe = fmt.Sprintf("%s/p%d", p.Spec.Name, i)
	return r
}

// ProbeRequest builds round's request of prompt i, scheduled at at (the simulator's
// probe rounds).
func (p *Probe) ProbeRequest(i, round int, at time.Time) *Req { return p.probe(i, round, at) }
