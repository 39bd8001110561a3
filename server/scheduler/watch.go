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
	w := Watch{Progress: s.lastProgress, Output: s.lastOutput, Live: len(s.reqs)}
	if s.batch != nil {
		w.Step = s.batchStart
	}
	if err := WatchdogErr(s.cfg.Semantics, wd, now, w); err != nil || !s.strict() {
		return err
	}
	return s.watchdogErr
}

// Watch is what the watchdog's health rule reads: when the step in flight began (zero:
// none), the last progress, the last output, and the requests in flight.
type Watch struct {
	Step, Progress, Output time.Time
	Live                   int
}

// WatchdogErr is the watchdog's rule for /health, one for the scheduler's own Health
// and the engine's (which reads what its loop published, so that it still answers while
// the loop itself is stuck): nil, or why /health must fail at now. Strict: work in
// flight and no progress for wd, or a step that has not returned within wd. SGLang: only
// a step running for wd with no output for wd. wd 0: off.
func WatchdogErr(sem Semantics, wd time.Duration, now time.Time, w Watch) error {
	if wd <= 0 {
		return nil
	}
	ran := now.Sub(w.Step)
	if sem == SemanticsSGLang {
		if !w.Step.IsZero() && ran >= wd && now.Sub(w.Output) >= wd {
			return fmt.Errorf("scheduler: watchdog: a step has run for %s", ran.Round(time.Millisecond))
		}
		return nil
	}
	if w.Live > 0 {
		if idle := now.Sub(w.Progress); idle >= wd {
			return fmt.Errorf("scheduler: watchdog: no progress for %s with %s in flight", idle.Round(time.Millisecond), plural(w.Live, "request"))
		}
	}
	if !w.Step.IsZero() && ran >= wd {
		return fmt.Errorf("scheduler: watchdog: a step has not returned for %s", ran.Round(time.Millisecond))
	}
	return nil
}

// liveInQueueOrder lists live requests by queue, each queue in its order. It allocates
