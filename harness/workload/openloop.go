package workload

import (
	"context"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"pdsoak/scenarios"
)

// StopGrace is how long past its window an open-loop attack may still send hits the
// attacker fell behind on before it is stopped.
const StopGrace = time.Second

// OpenLoop sends requests at the times a pacer dictates, whatever happens to earlier
// requests: vegeta's pacer and vegeta's Attacker loop (attack), each hit a request
// through the Sender.
type OpenLoop struct {
	Common
	Pacer vegeta.Pacer
}

// schedPacer replays a precomputed schedule: hit i is due at sched[i]; after the last
// hit it stops, so the number of requests depends only on the scenario and seed.
// Offsets count from the window's start; the attack's elapsed counts from its own
// start, offset later.
type schedPacer struct {
	sched  []time.Duration
	offset time.Duration
	rate   func(time.Duration) float64
}

func (p schedPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= uint64(len(p.sched)) {
		return 0, true
	}
	return max(p.sched[hits]-(elapsed+p.offset), 0), false
}

func (p schedPacer) Rate(elapsed time.Duration) float64 { return p.rate(elapsed + p.offset) }

// Run implements Workload.
func (o *OpenLoop) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, until := o.window(start)
	if !SleepCtx(ctx, time.Until(from)) {
		return Stats{}
	}
	sched := Schedule(o.Pacer, o.Spec.Duration.D(), o.Spec.Count)
	// A shard sends its part of the unsharded schedule, under the unsharded numbers.
	sched, seqs := o.Shard.pick(sched, o.Spec.Pacer != nil && o.Spec.Pacer.Type == scenarios.PacerPoisson, o.rng(shardKey(o.Spec.Name)))
	if len(sched) == 0 {
		return Stats{}
	}
	h := &hitter{o: o, s: s, ctx: ctx, sched: sched, seqs: seqs, began: from}
	workers := uint64(min(len(sched), 64))
	var maxWorkers uint64 // 0: unbounded
	if o.Spec.MaxInFlight > 0 {
		// A shard holds its share of the in-flight cap (rounded up).
		m := o.Spec.MaxInFlight
		if !o.Shard.whole() {
			m = (m + o.Shard.Count - 1) / o.Shard.Count
		}
		maxWorkers = uint64(m)
	}
	// The schedule counts from the window's start, whenever the attack gets going.
	offset := time.Since(from)
	actx, stop := context.WithCancel(ctx)
	defer stop()
	stopTimer := time.AfterFunc(time.Until(until.Add(StopGrace)), stop)
	defer stopTimer.Stop()
	attack(actx, schedPacer{sched: sched, offset: offset, rate: o.Pacer.Rate}, workers, maxWorkers, h.hit)
	return Stats{Requests: int(h.sent.Load()), Scheduled: len(sched)}
}

// hitter turns hit number seq into the seeded request seq, scheduled at its time in the
// schedule, and runs it through the Sender (which observes headers, tokens and stalls).
type hitter struct {
	o     *OpenLoop
	s     Sender
	ctx   context.Context
	began time.Time
	sched []time.Duration
	seqs  []uint64 // a shard's unsharded sequence numbers (nil: unsharded)
	sent  atomic.Int64
}

func (h *hitter) hit(seq uint64) {
	scheduled := h.began.Add(h.sched[seq])
	h.sent.Add(1)
	id := seq
	if h.seqs != nil && seq < uint64(len(h.seqs)) {
		id = h.seqs[seq]
	}
	h.s.Send(h.ctx, h.o.single(id, scheduled))
}
