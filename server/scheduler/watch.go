package scheduler

import (
	"fmt"
	"time"

	"pdsoak/server/gen"
)

// Time-driven rules: stage bounds, deadlines, the watchdog and health.

// Tick expires stage bounds and deadlines, and runs the watchdog.
func (s *Scheduler) Tick(now time.Time) {
	s.touch(now)
	var expired []*request
	var stages []Stage
	for _, r := range s.liveInQueueOrder() {
		if r.orphan {
			continue // BugAbortStormOrphans: nothing ever looks at it again
		}
		if !r.deadline.IsZero() && !now.Before(r.deadline) {
			// In a batch too (a stalled step): its pages are freed when the step ends.
			expired, stages = append(expired, r), append(stages, StageTotal)
			continue
		}
		if r.inBatch {
			continue
		}
		if b := s.bound(r.stage); b > 0 {
			start := r.since
			if r.stage == StageBootstrap {
				start = r.arrived // SGLang counts bootstrap from arrival; so does strict
			}
			if now.Sub(start) >= b {
				expired, stages = append(expired, r), append(stages, r.stage)
			}
		}
	}
	for i, r := range expired {
		st := stages[i]
		if st == StageRetracted {
			st = StageWaiting
		}
		age := now.Sub(r.since)
		if st == StageTotal || st == StageBootstrap {
			age = now.Sub(r.arrived)
		}
		s.finish(now, r, "", &gen.StageError{Stage: string(st),
			Err: fmt.Errorf("scheduler: %s bound expired after %s: %w", st, age.Round(time.Millisecond), gen.ErrTimeout)})
	}
	// Registrations whose leg never came.
	keep := s.bounds.Bootstrap
	if keep <= 0 {
		keep = 5 * time.Minute
	}
	for room, t := range s.regs {
		if now.Sub(t) >= keep {
			delete(s.regs, room)
		}
	}
	s.watchdog(now)
}

func (s *Scheduler) bound(st Stage) time.Duration {
	switch st {
	case StageBootstrap:
		return s.bounds.Bootstrap
	case StagePrealloc:
		if s.strict() {
			return s.bounds.Prealloc
		}
	case StageTransfer, StageInflight:
		if s.strict() {
			return s.bounds.Transfer
		}
	case StageWaiting, StageRetracted:
		return s.bounds.Waiting
	case StageRunning:
		return s.bounds.Running
	}
	return 0
}

func (s *Scheduler) watchdog(now time.Time) {
	wd := s.bounds.Watchdog
	if wd <= 0 || !s.strict() {
		return
	}
	if len(s.reqs) == 0 {
		if s.watchdogErr != nil && s.batch == nil && now.Sub(s.lastProgress) >= 2*wd {
			s.watchdogErr = nil
		}
		return
	}
	if now.Sub(s.lastProgress) < wd {
		return
	}
	// Nothing moved for the watchdog timeout: fail every request, including those of a
	// step that never came back (their pages are freed when it does).
	stuck := s.sortedLive()
	s.watchdogErr = fmt.Errorf("scheduler: watchdog: no progress for %s with %s in flight (%d queued); failed them",
		now.Sub(s.lastProgress).Round(time.Millisecond), plural(len(stuck), "request"), s.queued())
	for _, r := range stuck {
		s.finish(now, r, "", &gen.StageError{Stage: string(r.stage),
			Err: fmt.Errorf("scheduler: watchdog: no progress for %s: %w", wd, gen.ErrTimeout)})
	}
}

// Health returns nil, or why the worker must report unhealthy: in strict semantics,
// work queued and no progress for WatchdogTimeout (and until progress resumes after the
// watchdog fired); in SGLang semantics only a batch running longer than the watchdog
// without output.
func (s *Scheduler) Health(now time.Time) error {
	wd := s.bounds.Watchdog
	if wd <= 0 {
		return nil
	}
	if !s.strict() {
		if s.batch != nil && now.Sub(s.batchStart) >= wd && now.Sub(s.lastOutput) >= wd {
			return fmt.Errorf("scheduler: batch running for %s", now.Sub(s.batchStart).Round(time.Millisecond))
		}
		return nil
	}
	if len(s.reqs) > 0 && now.Sub(s.lastProgress) >= wd {
		return fmt.Errorf("scheduler: no progress for %s with %s in flight",
			now.Sub(s.lastProgress).Round(time.Millisecond), plural(len(s.reqs), "request"))
	}
	if s.batch != nil && now.Sub(s.batchStart) >= wd {
		return fmt.Errorf("scheduler: a step has not returned for %s", now.Sub(s.batchStart).Round(time.Millisecond))
	}
	return s.watchdogErr
}

// liveInQueueOrder lists live requests by queue, each queue in its order. It allocates
