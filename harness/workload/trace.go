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

// Arrival is one request of a trace's schedule: its number in the unsharded schedule
// and its offset from the window's start.
type Arrival struct {
	K  int
	At time.Duration
}

// Arrivals are this shard's part of the schedule (round-robin, as an open-loop
// deterministic pacer's), under the unsharded numbers: what the real driver (Run) and
// the simulator send, each at its offset.
func (t *Trace) Arrivals() []Arrival {
	offs, seqs := t.Shard.pick(t.Offsets(), false, nil)
	out := make([]Arrival, len(offs))
	for i, off := range offs {
		out[i] = Arrival{K: i, At: off}
		if seqs != nil {
			out[i].K = int(seqs[i])
		}
	}
	return out
}

// Run implements Workload.
func (t *Trace) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, _ := t.window(start)
	var wg sync.WaitGroup
	sent := 0
	for _, a := range t.Arrivals() {
		at := from.Add(a.At)
		if !SleepCtx(ctx, time.Until(at)) {
			break
		}
		sent++
		wg.Go(func() { s.Send(ctx, t.Request(a.K, at)) })
	}
	wg.Wait()
	return Stats{Requests: sent}
}
