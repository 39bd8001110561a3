package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	opt     timelineOptions

	mu      sync.Mutex
	running chan struct{} // closed when Run returns; nil when not running
	stopReq chan struct{} // RevertAll asks a running Run to stop
}

type entry struct {
	spec  scenarios.Fault
	fault Fault
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
	t := &Timeline{opt: o, stopReq: make(chan struct{})}
	specs, faults, err := Build(specs)
	if err != nil {
		return nil, err
	}
	for i, s := range specs {
		t.entries = append(t.entries, &entry{spec: s, fault: faults[i]})
	}
	for _, k := range Schedule(t.specs()) {
		t.steps = append(t.steps, k.Step)
	}
	return t, nil
}

func (t *Timeline) specs() []scenarios.Fault {
	out := make([]scenarios.Fault, len(t.entries))
	for i, e := range t.entries {
		out[i] = e.spec
	}
	return out
}

// Steps returns the ordered plan (faults held to the end have no revert step).
func (t *Timeline) Steps() []Step { return append([]Step(nil), t.steps...) }

// errAborted is the cancel cause Run gives the calls in flight once a fault has failed.
var errAborted = errors.New("chaos: run aborted: another fault failed")

// Run carries out the timeline, with step times measured from start: the rules are
// the Sequencer's, this is its driver (goroutines and the wall clock). Every fault runs
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
	rt := &liveRuntime{ctx: ctx, rctx: rctx, cancel: cancel, env: env, opt: t.opt,
		posts: make(chan func()), quit: make(chan struct{})}
	faults := make([]Fault, len(t.entries))
	for i, e := range t.entries {
		faults[i] = e.fault
	}
	seq := NewSequencer(t.specs(), faults, rt, t.opt.verifyTimeout, t.opt.logger)
	done := make(chan struct{})
	t.mu.Lock()
	t.running = done
	t.mu.Unlock()
	defer close(done)
	seq.Start(start)
	stopped := ctx.Done()
	for !seq.Finished() {
		select {
		case fn := <-rt.posts:
			// A call the stop's ctx cut short answers after ctx ended: the Sequencer
			// hears of the stop first, so it tells that answer from a failure.
			if stopped != nil && ctx.Err() != nil {
				stopped = nil
				seq.Stop()
			}
			fn()
		case <-stopped:
			stopped = nil
			seq.Stop()
		case <-t.stopReq:
			seq.Stop()
		}
	}
	close(rt.quit) // timers that fired late post nothing
	rt.wg.Wait()
	return seq.Err()
}

// liveRuntime is the Sequencer's Runtime over goroutines and the wall clock: each
// call runs in its own goroutine and every answer is posted to Run's loop.
type liveRuntime struct {
	ctx, rctx context.Context // the run's; rctx is cancelled on abort too
	cancel    context.CancelCauseFunc
	env       Env
	opt       timelineOptions
	posts     chan func()
	quit      chan struct{}
	wg        sync.WaitGroup
}

func (r *liveRuntime) post(fn func()) {
	select {
	case r.posts <- fn:
	case <-r.quit:
	}
}

func (r *liveRuntime) Now() time.Time   { return time.Now() }
func (r *liveRuntime) Stamp() time.Time { return r.opt.now() }
func (r *liveRuntime) Cancel()          { r.cancel(errAborted) }
func (r *liveRuntime) Emit(ev ledger.Event) {
	r.env.Emit(ev)
}

func (r *liveRuntime) At(t time.Time, fn func()) func() {
	tm := time.AfterFunc(time.Until(t), func() { r.post(fn) })
	return func() { tm.Stop() }
}

// Do runs op in a goroutine: Apply under the run's context, Verify also bounded by
// its deadline, Revert bounded by the revert timeout even once the run has ended.
func (r *liveRuntime) Do(op Op, done func(error)) {
	r.wg.Go(func() {
		ctx, cancel := r.rctx, context.CancelFunc(func() {})
		switch op.Kind {
		case OpVerify:
			ctx, cancel = context.WithDeadline(r.rctx, op.Deadline)
		case OpRevert:
			ctx, cancel = context.WithTimeout(context.WithoutCancel(r.ctx), r.opt.revertTimeout)
		}
		err := op.Call(ctx, r.env)
		cancel()
		r.post(func() { done(err) })
	})
}

// RevertAll stops a running Run and waits until it has reverted everything (its error
// is Run's). After Run has returned nothing is applied, and it returns nil. It is safe
// to call more than once and from another goroutine than Run (a signal handler).
func (t *Timeline) RevertAll(context.Context, Env) error {
	t.mu.Lock()
	running := t.running
	t.mu.Unlock()
	if running == nil {
		return nil
	}
	select {
	case t.stopReq <- struct{}{}:
	case <-running:
	}
	<-running
	return nil
}

// Build names every spec that has no name ("<type>-<i>") and builds its fault,
// reporting every bad spec at once (duplicate names, negative times, bad params).
func Build(specs []scenarios.Fault) ([]scenarios.Fault, []Fault, error) {
	var (
		out    []scenarios.Fault
		faults []Fault
		errs   []error
	)
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
		out, faults = append(out, s), append(faults, f)
	}
	return out, faults, errors.Join(errs...)
}
