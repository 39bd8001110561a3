package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"pdsoak/reports"
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

	mu  sync.Mutex // serialises Apply/Verify/Revert calls and the active flags
	seq int        // applications so far
}

type entry struct {
	spec   scenarios.Fault
	fault  Fault
	active bool // applied (perhaps partly) and not yet reverted
	seq    int  // application order, for RevertAll
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
	type keyed struct {
		Step
		idx int
	}
	var ks []keyed
	for i, e := range t.entries {
		ks = append(ks, keyed{Step{At: e.spec.At.D(), Kind: StepApply, Fault: e.spec}, i})
		if e.spec.For > 0 {
			ks = append(ks, keyed{Step{At: e.spec.At.D() + e.spec.For.D(), Kind: StepRevert, Fault: e.spec}, i})
		}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if ks[i].At != ks[j].At {
			return ks[i].At < ks[j].At
		}
		if ks[i].Kind != ks[j].Kind {
			return ks[i].Kind == StepRevert
		}
		return ks[i].idx < ks[j].idx
	})
	for _, k := range ks {
		t.steps = append(t.steps, k.Step)
	}
	return t, nil
}

// Steps returns the ordered plan (faults held to the end have no revert step).
func (t *Timeline) Steps() []Step { return append([]Step(nil), t.steps...) }

func (t *Timeline) entry(name string) *entry {
	for _, e := range t.entries {
		if e.spec.Name == name {
			return e
		}
	}
	return nil
}

// Run carries out the timeline, with step times measured from start. For each apply it
// calls Apply, emits fault_start (with Error when Apply failed), polls Verify until it
// succeeds or the verify timeout passes and emits fault_verified; for each revert it
// calls Revert and emits fault_stop. Steps run one at a time, so a slow verification
// delays the steps after it (events carry the actual times).
//
// Run returns when every step is done and no fault is held, or when ctx ends (the end
// of load, or Ctrl-C); either way every applied fault is reverted before it returns.
// A fault that cannot be applied, is not verified (ErrNotVerified) or cannot be reverted
// stops the run: Run reverts everything and returns the error, which the harness turns
// into exit 3. An ended ctx is not an error.
func (t *Timeline) Run(ctx context.Context, env Env, start time.Time) error {
	for _, s := range t.steps {
		wait := time.Until(start.Add(s.At))
		if wait > 0 {
			tm := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				tm.Stop()
				return t.RevertAll(context.WithoutCancel(ctx), env)
			case <-tm.C:
			}
		}
		if ctx.Err() != nil {
			return t.RevertAll(context.WithoutCancel(ctx), env)
		}
		e := t.entry(s.Fault.Name)
		var err error
		switch s.Kind {
		case StepApply:
			err = t.apply(ctx, env, e)
		case StepRevert:
			err = t.revert(ctx, env, e)
		}
		if err != nil {
			return errors.Join(err, t.RevertAll(context.WithoutCancel(ctx), env))
		}
	}
	if t.anyActive() {
		<-ctx.Done()
	}
	return t.RevertAll(context.WithoutCancel(ctx), env)
}

func (t *Timeline) anyActive() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if e.active {
			return true
		}
	}
	return false
}

func (t *Timeline) event(typ reports.EventType, e *entry) reports.Event {
	return reports.Event{Time: t.opt.now(), Type: typ, Fault: e.spec.Name, FaultType: e.spec.Type,
		Target: e.spec.Target, Params: e.spec.Params}
}

func (t *Timeline) apply(ctx context.Context, env Env, e *entry) error {
	log := t.opt.logger.With("fault", e.spec.Name, "fault_type", e.spec.Type, "target", e.spec.Target)
	t.mu.Lock()
	t.seq++
	e.active, e.seq = true, t.seq
	err := e.fault.Apply(ctx, env)
	t.mu.Unlock()
	start := t.event(reports.EventFaultStart, e)
	if err != nil {
		log.Error("fault apply failed", "err", err)
		start.Error = err.Error()
		env.Emit(start)
		ev := t.event(reports.EventFaultVerified, e)
		ev.Passed, ev.Error = reports.Bool(false), err.Error()
		ev.Detail = "apply failed"
		env.Emit(ev)
		return fmt.Errorf("%w: %s: %w", ErrApply, e.spec.Name, err)
	}
	log.Info("fault applied")
	env.Emit(start)

	vctx, cancel := context.WithTimeout(ctx, t.opt.verifyTimeout)
	defer cancel()
	interval := 20 * time.Millisecond
	var last error
	for {
		t.mu.Lock()
		last = e.fault.Verify(vctx, env)
		t.mu.Unlock()
		if last == nil {
			break
		}
		select {
		case <-vctx.Done():
		case <-time.After(interval):
			interval = min(2*interval, 500*time.Millisecond)
			continue
		}
		break
	}
	ev := t.event(reports.EventFaultVerified, e)
	if last != nil {
		why := "within " + t.opt.verifyTimeout.String()
		if ctx.Err() != nil {
			why = "before the run ended"
		}
		log.Error("fault not verified", "err", last)
		ev.Passed, ev.Error, ev.Detail = reports.Bool(false), last.Error(), "no proof "+why
		env.Emit(ev)
		return fmt.Errorf("%w %s: %s: %w", ErrNotVerified, why, e.spec.Name, last)
	}
	ev.Passed = reports.Bool(true)
	if ev2, ok := e.fault.(Evidencer); ok {
		ev.Detail = ev2.Evidence()
	}
	log.Info("fault verified", "evidence", ev.Detail)
	env.Emit(ev)
	return nil
}

func (t *Timeline) revert(ctx context.Context, env Env, e *entry) error {
	t.mu.Lock()
	if !e.active {
		t.mu.Unlock()
		return nil
	}
	e.active = false
	err := e.fault.Revert(ctx, env)
	t.mu.Unlock()
	ev := t.event(reports.EventFaultStop, e)
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
