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

// Round is probe round k (0-based) of a window [from, to): when it is due and its
// requests (this shard's), or ok false when the window has no such round. A round starts
// only once the previous one resolved: the real driver (Run) and the simulator both ask
// for round k+1 then.
func (p *Probe) Round(from, to time.Time, k int) (at time.Time, reqs []*Req, ok bool) {
	n, every := max(p.Spec.Count, 1), p.Spec.Interval.D()
	if every <= 0 {
		every = time.Second
	}
	at = from.Add(time.Duration(k) * every)
	if !at.Before(to) {
		return at, nil, false
	}
	for i := 0; i < n; i++ {
		if p.Shard.owns(uint64(k*n + i)) { // else another shard's probe
			reqs = append(reqs, p.probe(i, k, at))
		}
	}
	return at, reqs, true
}

// Run implements Workload.
func (p *Probe) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, to := p.window(start)
	sent := 0
	for k := 0; ; k++ {
		at, reqs, ok := p.Round(from, to, k)
		if !ok || !SleepCtx(ctx, time.Until(at)) {
			break
		}
		var wg sync.WaitGroup
		for _, r := range reqs {
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
