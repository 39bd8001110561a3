package scheduler

import (
	"fmt"
	"slices"
	"time"

	"pdsoak/server/gen"
)

// Read-only views: stats, live requests, progress times.

// only the returned slice, which is reused between calls.
func (s *Scheduler) liveInQueueOrder() []*request {
	out := s.scratch[:0]
	for _, q := range [][]*request{s.bootstrap, s.prealloc, s.transfer, s.waiting, s.running, s.inflight, s.retracted} {
		out = append(out, q...)
	}
	s.scratch = out
	return out
}

func (s *Scheduler) sortedLive() []*request {
	out := make([]*request, 0, len(s.reqs))
	for _, r := range s.reqs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *request) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return out
}

// Stats returns the current queue lengths and pool use.
func (s *Scheduler) Stats() Stats {
	st := Stats{
		Running: len(s.running), Waiting: len(s.waiting), Bootstrap: len(s.bootstrap),
		Prealloc: len(s.prealloc), Transfer: len(s.transfer), Inflight: len(s.inflight),
		Retracted: len(s.retracted), Queued: s.queued(),
		UsedPages: s.pool.UsedPages(), TotalPages: s.pool.Capacity(), PageSize: s.cfg.PageSize,
		PendingRegistrations: len(s.regs), DecodeSteps: s.decodeSteps, GeneratedTokens: s.generated,
	}
	s.cacheStats(&st)
	return st
}

// Timeouts returns how many requests each stage bound expired, by stage.
func (s *Scheduler) Timeouts() map[Stage]uint64 {
	out := make(map[Stage]uint64, len(s.timeoutsByStage))
	for k, v := range s.timeoutsByStage {
		out[k] = v
	}
	return out
}

// Live is the number of requests not yet finished.
func (s *Scheduler) Live() int { return len(s.reqs) }

// BatchInFlight reports whether a planned batch awaits StepDone.
func (s *Scheduler) BatchInFlight() bool { return s.batch != nil }

// Requests describes every live request, oldest first.
func (s *Scheduler) Requests(now time.Time) []gen.RequestInfo {
	live := s.sortedLive()
	out := make([]gen.RequestInfo, 0, len(live))
	for _, r := range live {
		ri := gen.RequestInfo{ID: r.id, Stage: string(r.stage),
			AgeSeconds: now.Sub(r.arrived).Seconds(), StageAgeSeconds: now.Sub(r.since).Seconds(),
			PromptTokens: r.nPrompt, OutputTokens: r.output(), Pages: len(r.pages), CachedPrefixTokens: r.prefix}
		if s.cfg.Role == RolePrefill {
			ri.OutputTokens = 0
		}
		if r.pd {
			room := r.room
			ri.Room = &room
		}
		out = append(out, ri)
	}
	return out
}

// LastProgress is when something last moved forward (a step, a transfer, a stage
// change out of a wait), or when work appeared after an idle period.
func (s *Scheduler) LastProgress() time.Time { return s.lastProgress }

// LastOutput is when a token was last sampled or received.
func (s *Scheduler) LastOutput() time.Time { return s.lastOutput }

// plural is "1 request", "2 requests".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
