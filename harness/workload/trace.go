package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"pdsoak/harness/client"
	"pdsoak/scenarios"
	"pdsoak/traces"
)

// Trace replays a trace's schedule (scenarios.TraceSchedule): request k at the window's
// start plus its trace arrival, whatever happened to earlier ones, with the trace's
// prompt length (text synthesized block by block, so shared hash ids are shared
// prefixes) and output length as max_tokens. Latency counts from the scheduled time.
type Trace struct {
	Common
	// Sched is the whole (unsharded) schedule.
	Sched []traces.Request
}

func newTrace(sc *scenarios.Scenario, c Common) (*Trace, error) {
	sched, err := sc.TraceSchedule(c.Spec, c.Spec.Duration.D())
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return &Trace{Common: c, Sched: sched}, nil
}

// Request builds request k of the unsharded schedule, scheduled at the given time.
// The real runner and the simulator both build trace requests here.
func (t *Trace) Request(k int, scheduled time.Time) *Req {
	tr := t.Sched[k]
	id := fmt.Sprintf("%s-%06d", t.Spec.Name, k)
	r := &Req{Request: t.base(id, scheduled), Workload: t.Spec.Name}
	r.MaxTokens = max(tr.Output, 1)
	if c := t.Spec.Trace.MaxTokens; c > 0 {
		r.MaxTokens = min(r.MaxTokens, c)
	}
	// The salt is the scenario's seed: one run's prompts share blocks with each other,
	// not with another seed's.
	text := traces.Prompt(tr, t.Spec.Trace.BlockTokens, uint64(t.Seed))
	if t.Spec.Endpoint == scenarios.EndpointCompletions {
		r.Prompt = text
	} else {
		r.Messages = []client.Message{{Role: "user", Content: text}}
	}
	r.PromptBytes = len(text)
	return r
}

// Offsets are the schedule's arrival times.
func (t *Trace) Offsets() []time.Duration {
	out := make([]time.Duration, len(t.Sched))
	for i, r := range t.Sched {
		out[i] = r.At
	}
	return out
}

// Run implements Workload: a shard sends its round-robin part of the schedule (as an
// open-loop deterministic pacer's), under the unsharded numbers.
func (t *Trace) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, _ := t.window(start)
	offs, seqs := t.Shard.pick(t.Offsets(), false, nil)
	var wg sync.WaitGroup
	sent := 0
	for i, off := range offs {
		k := i
		if seqs != nil {
			k = int(seqs[i])
		}
		at := from.Add(off)
		if !SleepCtx(ctx, time.Until(at)) {
			break
		}
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Send(ctx, t.Request(k, at))
		}()
	}
	wg.Wait()
	return Stats{Requests: sent}
}
