package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// ErrApply: a fault could not be applied (the mechanism failed: no proxy, admin API
// refused, process missing). Like ErrNotVerified it means exit 3.
var ErrApply = errors.New("chaos: fault could not be applied")

// Defaults of a Timeline.
const (
	DefaultVerifyTimeout = 10 * time.Second
	DefaultRevertTimeout = 30 * time.Second
)

// StepKind is what a timeline step does.
type StepKind string

// Step kinds.
const (
	StepApply  StepKind = "apply"
	StepRevert StepKind = "revert"
)

// Step is one point of the timeline: at At after the start, apply or revert a fault.
type Step struct {
	At    time.Duration
	Kind  StepKind
	Fault scenarios.Fault
}

// Timeline applies faults on a schedule. Build it with NewTimeline, then call Run once.
type Timeline struct {
	entries []*entry
	steps   []Step
	plan    []planStep // steps with their entry and same-instant predecessors
	opt     timelineOptions

	mu  sync.Mutex // guards the active flags and seq
	seq int        // applications so far
}

type entry struct {
	spec  scenarios.Fault
	fault Fault
	call  sync.Mutex // serialises this fault's Apply/Verify/Revert calls
	// Guarded by Timeline.mu.
	active bool // applied (perhaps partly) and not yet reverted
	seq    int  // application order, for RevertAll
}

// planStep is one step of the plan as Run carries it out.
type planStep struct {
	Step
	entry int   // index into entries
	after []int // plan indexes of the steps at the same instant ordered before it
}

type timelineOptions struct {
	verifyTimeout time.Duration
	revertTimeout time.Duration
	logger        *slog.Logger
	now           func() time.Time
}

// TimelineOption configures a Timeline.
type TimelineOption func(*timelineOptions)

// WithVerifyTimeout bounds how long a fault may take to prove itself (default 10s).
func WithVerifyTimeout(d time.Duration) TimelineOption {
	return func(o *timelineOptions) { o.verifyTimeout = d }
}

// WithRevertTimeout bounds the reverts done after the run's context ended (default 30s).
func WithRevertTimeout(d time.Duration) TimelineOption {
	return func(o *timelineOptions) { o.revertTimeout = d }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) TimelineOption { return func(o *timelineOptions) { o.logger = l } }

// WithClock sets the clock used for event times (default time.Now). Waiting uses real
// timers.
func WithClock(now func() time.Time) TimelineOption { return func(o *timelineOptions) { o.now = now } }

// NewTimeline builds every fault of specs (reporting all bad specs at once) and orders
// their steps: by time, reverts before applies at the same instant, then spec order.
// A fault with For == 0 is held until Run's context ends.
func NewTimeline(specs []scenarios.Fault, opts ...TimelineOption) (*Timeline, error) {
	o := timelineOptions{verifyTimeout: DefaultVerifyTimeout, revertTimeout: DefaultRevertTimeout,
		logger: slog.Default(), now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	t := &Timeline{opt: o}
	var errs []error
	names := map[string]bool{}
	for i, s := range specs {
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s-%d", s.Type, i)
		}
		if names[s.Name] {
			errs = append(errs, fmt.Errorf("%w: duplicate fault name %q", ErrBadSpec, s.Name))
			continue
		}
		names[s.Name] = true
		if s.At < 0 || s.For < 0 {
			errs = append(errs, fmt.Errorf("%w: %s: at and for must be ≥ 0", ErrBadSpec, s.Name))
			continue
		}
		f, err := New(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.entries = append(t.entries, &entry{spec: s, fault: f})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	named := make([]scenarios.Fault, len(t.entries))
	for i, e := range t.entries {
		named[i] = e.spec
	}
	ks := Schedule(named)
	for i, k := range ks {
		t.steps = append(t.steps, k.Step)
		ps := planStep{Step: k.Step, entry: k.Index}
		for j := i - 1; j >= 0 && ks[j].At == k.At; j-- {
			ps.after = append(ps.after, j)
		}
		t.plan = append(t.plan, ps)
	}
	return t, nil
}

// Steps returns the ordered plan (faults held to the end have no revert step).
func (t *Timeline) Steps() []Step { return append([]Step(nil), t.steps...) }

// errAborted is the cancel cause Run gives the other faults once one has failed.
var errAborted = errors.New("chaos: run aborted: another fault failed")

// Run carries out the timeline, with step times measured from start. Every fault runs
// on its own schedule: at its At it calls Apply and emits fault_start (with Error when
// Apply failed), then polls Verify until it succeeds and emits fault_verified; at
// At+For it calls Revert and emits fault_stop. A slow verification therefore delays
// nothing but its own fault's proof: the other faults start and stop on time, and a
// fault is held for its For however long the others take to prove themselves.
// Verification is bounded by the verify timeout and by the fault's own revert time: a
// fault not verified when it is due to be reverted is ErrNotVerified. Steps due at the
// same instant keep the order of Steps (reverts first, then spec order): each waits
// for the ones before it to finish their Apply or Revert call (not their verification).
// The faults' Env calls may therefore run concurrently: Env implementations must be
// safe for concurrent use. Calls on one fault never overlap.
//
// Run returns when every fault is done and no fault is held, or when ctx ends (the end
// of load, or Ctrl-C); either way every applied fault is reverted before it returns.
// A fault that cannot be applied, is not verified (ErrNotVerified) or cannot be reverted
// stops the run: the other faults are cancelled (one still verifying gets a failed
// fault_verified, but only the first failure is the error), Run reverts everything
// applied, latest first, and returns the error, which the harness turns into exit 3. An
// ended ctx is not an error (except for a fault whose verification it cut short).
// Every goroutine Run starts has ended when it returns.
func (t *Timeline) Run(ctx context.Context, env Env, start time.Time) error {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make([]chan struct{}, len(t.plan)) // closed when the step finished or was abandoned
	for i := range done {
		done[i] = make(chan struct{})
	}
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
	)
	for i := range t.entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.runEntry(rctx, env, start, i, done); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
				cancel(errAborted)
			}
		}()
	}
	wg.Wait()
	errs = append(errs, t.RevertAll(context.WithoutCancel(ctx), env))
	return errors.Join(errs...)
}

// runEntry carries out one fault's schedule: wait, apply, verify, hold, revert. It
// closes the done channels of the fault's steps once they are finished or abandoned.
func (t *Timeline) runEntry(ctx context.Context, env Env, start time.Time, idx int, done []chan struct{}) error {
	e := t.entries[idx]
	apply, revert := -1, -1
	for i, ps := range t.plan {
		if ps.entry != idx {
			continue
		}
		if ps.Kind == StepApply {
			apply = i
		} else {
			revert = i
		}
	}
	closed := map[int]bool{}
	finish := func(i int) {
		if i >= 0 && !closed[i] {
			closed[i] = true
			close(done[i])
		}
	}
	defer finish(revert)
	defer finish(apply)
	aborted := func() bool { return errors.Is(context.Cause(ctx), errAborted) }

	if !t.waitStep(ctx, start, apply, done) {
		return nil
	}
	err := t.apply(ctx, env, e)
	finish(apply)
	if err != nil {
		if aborted() {
			return nil // the first failure is the run's error
		}
		return err
	}
	if err := t.verify(ctx, env, e, start); err != nil {
		if aborted() {
			return nil
		}
		return err
	}
	if revert < 0 {
		<-ctx.Done() // held until the run ends; Run's RevertAll reverts it
		return nil
	}
	if !t.waitStep(ctx, start, revert, done) {
		return nil
	}
	// A due revert finishes even if the run ends meanwhile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.opt.revertTimeout)
	defer cancel()
	err = t.revert(rctx, env, e)
	finish(revert)
	return err
}

// waitStep waits until plan step i is due and the steps before it at the same instant
// are done. False when ctx ended first.
func (t *Timeline) waitStep(ctx context.Context, start time.Time, i int, done []chan struct{}) bool {
	ps := t.plan[i]
	if wait := time.Until(start.Add(ps.At)); wait > 0 {
		tm := time.NewTimer(wait)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-tm.C:
		}
	}
	for _, j := range ps.after {
		select {
		case <-ctx.Done():
			return false
		case <-done[j]:
		}
	}
	return ctx.Err() == nil
}

func (t *Timeline) event(typ ledger.EventType, e *entry) ledger.Event {
	ev := FaultEvent(typ, e.spec)
	ev.Time = t.opt.now()
	return ev
}

func (t *Timeline) logger(e *entry) *slog.Logger {
	return t.opt.logger.With("fault", e.spec.Name, "fault_type", e.spec.Type, "target", e.spec.Target)
}

// apply calls Apply and emits fault_start (and a failed fault_verified when it failed).
func (t *Timeline) apply(ctx context.Context, env Env, e *entry) error {
	log := t.logger(e)
	e.call.Lock()
	t.mu.Lock()
	t.seq++
	e.active, e.seq = true, t.seq
	t.mu.Unlock()
	// The fault starts acting when Apply begins (a kill cuts streams before Apply
	// returns): fault_start carries that time, so requests cut during Apply fall in
	// its window.
	began := t.opt.now()
	err := e.fault.Apply(ctx, env)
	e.call.Unlock()
	start := t.event(ledger.EventFaultStart, e)
	start.Time = began
	if err != nil {
		log.Error("fault apply failed", "err", err)
		start.Error = err.Error()
		env.Emit(start)
		ev := t.event(ledger.EventFaultVerified, e)
		ev.Passed, ev.Error = ledger.Bool(false), err.Error()
		ev.Detail = "apply failed"
		env.Emit(ev)
		return ApplyFailedError(e.spec.Name, err)
	}
	log.Info("fault applied")
	env.Emit(start)
	return nil
}

// verify polls Verify until it succeeds, the verify timeout passes, the fault is due
// to be reverted (when timed) or ctx ends, and emits fault_verified. Each Verify call
// holds the fault's call lock, never the whole verification.
func (t *Timeline) verify(ctx context.Context, env Env, e *entry, start time.Time) error {
	log := t.logger(e)
	deadline, why := VerifyBound(e.spec, start, time.Now(), t.opt.verifyTimeout)
	vctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	interval := VerifyFirstInterval
	var last error
	for {
		e.call.Lock()
		t.mu.Lock()
		active := e.active
		t.mu.Unlock()
		if active {
			last = e.fault.Verify(vctx, env)
		} else {
			last = errors.New("chaos: reverted before it was verified")
		}
		e.call.Unlock()
		if last == nil || !active {
			break
		}
		tm := time.NewTimer(interval)
		select {
		case <-vctx.Done():
		case <-tm.C:
			interval = NextVerifyInterval(interval)
			continue
		}
		tm.Stop()
		break
	}
	ev := t.event(ledger.EventFaultVerified, e)
	if last != nil {
		switch {
		case errors.Is(context.Cause(ctx), errAborted):
			why = "before the run was aborted"
		case ctx.Err() != nil:
			why = "before the run ended"
		}
		log.Error("fault not verified", "err", last, "why", why)
		ev.Passed, ev.Error, ev.Detail = ledger.Bool(false), last.Error(), "no proof "+why
		env.Emit(ev)
		return NotVerifiedError(why, e.spec.Name, last)
	}
	ev.Passed = ledger.Bool(true)
	if ev2, ok := e.fault.(Evidencer); ok {
		ev.Detail = ev2.Evidence()
	}
	log.Info("fault verified", "evidence", ev.Detail)
	env.Emit(ev)
	return nil
}

// revert calls Revert on an applied fault and emits fault_stop; a no-op otherwise.
func (t *Timeline) revert(ctx context.Context, env Env, e *entry) error {
	e.call.Lock()
	t.mu.Lock()
	if !e.active {
		t.mu.Unlock()
		e.call.Unlock()
		return nil
	}
	e.active = false
	t.mu.Unlock()
	err := e.fault.Revert(ctx, env)
	e.call.Unlock()
	ev := t.event(ledger.EventFaultStop, e)
	if err != nil {
		t.opt.logger.Error("fault revert failed", "fault", e.spec.Name, "err", err)
		ev.Error = err.Error()
		env.Emit(ev)
		return fmt.Errorf("chaos: revert %s: %w", e.spec.Name, err)
	}
	t.opt.logger.Info("fault reverted", "fault", e.spec.Name)
	env.Emit(ev)
	return nil
}

// RevertAll reverts every applied fault, latest first, each bounded by the revert
// timeout, and returns their errors joined. It is safe to call more than once and from
// another goroutine than Run (a signal handler).
func (t *Timeline) RevertAll(ctx context.Context, env Env) error {
	t.mu.Lock()
	var active []*entry
	for _, e := range t.entries {
		if e.active {
			active = append(active, e)
		}
	}
	t.mu.Unlock()
	sort.Slice(active, func(i, j int) bool { return active[i].seq > active[j].seq })
	var errs []error
	for _, e := range active {
		rctx, cancel := context.WithTimeout(ctx, t.opt.revertTimeout)
		errs = append(errs, t.revert(rctx, env, e))
		cancel()
	}
	return errors.Join(errs...)
}
