package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// The fault timeline as a state machine: Sequencer holds every rule of a timeline run
// (which step is due, same-instant order, verify polling and its bound, what a failure
// or the end of the run cancels, the reverts latest first) and acts only through a
// Runtime. Timeline.Run drives it with goroutines and the wall clock; the simulator
// (package sim) drives the same Sequencer on its event loop, its calls returning at
// once. It is not safe for concurrent use: a driver feeds it from one goroutine.

// OpKind is which Fault method an Op calls.
type OpKind int

// Op kinds.
const (
	OpApply OpKind = iota
	OpVerify
	OpRevert
)

// Op is one call the Sequencer asks its Runtime to make.
type Op struct {
	Kind  OpKind
	Fault Fault
	// Deadline bounds an OpVerify call (VerifyBound).
	Deadline time.Time
}

// Call makes the call on env.
func (o Op) Call(ctx context.Context, env Env) error {
	switch o.Kind {
	case OpApply:
		return o.Fault.Apply(ctx, env)
	case OpVerify:
		return o.Fault.Verify(ctx, env)
	}
	return o.Fault.Revert(ctx, env)
}

// Runtime is the IO a Sequencer acts through.
type Runtime interface {
	// Now is the clock steps and verify bounds are measured on.
	Now() time.Time
	// Stamp is the time written on events (Now, or an injected clock).
	Stamp() time.Time
	// At calls fn (through the driver's one goroutine) at t; stop cancels it.
	At(t time.Time, fn func()) (stop func())
	// Do makes the call op and then calls done with its error (from the driver's
	// goroutine; a driver whose calls return at once may call done before Do returns).
	Do(op Op, done func(error))
	// Cancel cuts the calls in flight short: the run is aborted.
	Cancel()
	// Emit records a ledger event.
	Emit(ev ledger.Event)
}

type entryState int

const (
	statePending entryState = iota
	stateApplying
	stateVerifying
	stateHolding // verified, until its revert step or the end of the run
	stateReverting
	stateDone
)

// seqEntry is one fault's progress.
type seqEntry struct {
	spec   scenarios.Fault
	fault  Fault
	state  entryState
	active bool // applied (perhaps partly) and not yet reverted
	seq    int  // application order, for the reverts at the end
	inCall bool // a call on this fault is in flight (calls on one fault never overlap)

	// The verification: its bound, the next pause, the last failed poll's error, the
	// pending timer (a poll or the give-up), and whether its revert is due.
	deadline time.Time
	why      string
	interval time.Duration
	last     error
	timer    func()
	cut      bool
}

type seqStep struct {
	PlannedStep
	after        []int // steps at the same instant ordered before it
	due, started bool
	done         bool // its call returned (or it was abandoned)
	stop         func()
}

// Sequencer runs one timeline: Start, then the Runtime's callbacks, Stop when the run
// ends; Finished says when everything applied has been reverted, Err what failed.
type Sequencer struct {
	rt      Runtime
	log     *slog.Logger
	timeout time.Duration
	entries []*seqEntry
	steps   []*seqStep
	start   time.Time

	seq               int
	calls             int
	errs              []error
	aborted, stopping bool
	reverting         []*seqEntry // the final reverts, latest first
	final, finished   bool

	busy  bool
	queue []func()
}

// NewSequencer returns the state machine of a timeline over faults (one per spec,
// names set and unique), with verifyTimeout bounding each proof.
func NewSequencer(specs []scenarios.Fault, faults []Fault, rt Runtime, verifyTimeout time.Duration, log *slog.Logger) *Sequencer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sequencer{rt: rt, log: log, timeout: verifyTimeout}
	for i, sp := range specs {
		s.entries = append(s.entries, &seqEntry{spec: sp, fault: faults[i]})
	}
	ks := Schedule(specs)
	for i, k := range ks {
		st := &seqStep{PlannedStep: k}
		for j := i - 1; j >= 0 && ks[j].At == k.At; j-- {
			st.after = append(st.after, j)
		}
		s.steps = append(s.steps, st)
	}
	return s
}

// input runs fn and whatever it queued: a Runtime may answer a call before Do returns.
func (s *Sequencer) input(fn func()) {
	s.queue = append(s.queue, fn)
	if s.busy {
		return
	}
	s.busy = true
	for len(s.queue) > 0 {
		f := s.queue[0]
		s.queue = s.queue[1:]
		f()
		if len(s.queue) == 0 {
			s.finish() // may queue the next revert
		}
	}
	s.busy = false
}

// Start schedules every step, measured from start.
func (s *Sequencer) Start(start time.Time) {
	s.input(func() {
		s.start = start
		for i, st := range s.steps {
			st.stop = s.rt.At(start.Add(st.At), func() { s.input(func() { s.steps[i].due = true; s.advance() }) })
		}
	})
}

// Stop ends the run (the end of load, or an interrupt): nothing more is applied, a
// proof still pending fails, and everything applied is reverted, latest first.
func (s *Sequencer) Stop() {
	s.input(func() {
		if !s.stopping && !s.finished {
			s.stopping = true
			s.sweep()
		}
	})
}

// Finished reports whether the run is over: nothing applied, no call in flight.
func (s *Sequencer) Finished() bool { return s.finished }

// Err is every failure joined (nil when each fault was applied, proved and reverted).
func (s *Sequencer) Err() error { return errors.Join(s.errs...) }

func (s *Sequencer) event(typ ledger.EventType, e *seqEntry) ledger.Event {
	ev := FaultEvent(typ, e.spec)
	ev.Time = s.rt.Stamp()
	return ev
}

func (s *Sequencer) call(e *seqEntry, op Op, done func(error)) {
	e.inCall = true
	s.calls++
	op.Fault = e.fault
	s.rt.Do(op, func(err error) {
		s.input(func() {
			e.inCall = false
			s.calls--
			done(err)
		})
	})
}

// advance starts every step that is due and whose same-instant predecessors are done.
func (s *Sequencer) advance() {
	if s.aborted || s.stopping {
		return
	}
	for i, st := range s.steps {
		if st.started || !st.due || !s.ready(st) {
			continue
		}
		e := s.entries[st.Index]
		if st.Kind == StepApply {
			st.started = true
			s.apply(i, e)
			continue
		}
		switch e.state {
		case stateHolding:
			st.started = true
			s.revert(e, func() { st.done = true })
		case stateVerifying:
			// Due to be reverted before it was proved: no proof before its revert.
			e.cut = true
			if !e.inCall {
				s.giveUp(e)
			}
		}
	}
}

func (s *Sequencer) ready(st *seqStep) bool {
	for _, j := range st.after {
		if !s.steps[j].done {
			return false
		}
	}
	return true
}

// apply calls Apply and emits fault_start (and a failed fault_verified when it failed);
// the fault starts acting when Apply begins, so fault_start carries that time.
func (s *Sequencer) apply(step int, e *seqEntry) {
	s.seq++
	e.state, e.active, e.seq = stateApplying, true, s.seq
	began := s.rt.Stamp()
	s.call(e, Op{Kind: OpApply}, func(err error) {
		s.steps[step].done = true
		ev := s.event(ledger.EventFaultStart, e)
		ev.Time = began
		log := s.log.With("fault", e.spec.Name, "fault_type", e.spec.Type, "target", e.spec.Target)
		if err != nil {
			log.Error("fault apply failed", "err", err)
			ev.Error = err.Error()
			s.rt.Emit(ev)
			v := s.event(ledger.EventFaultVerified, e)
			v.Passed, v.Error, v.Detail = ledger.Bool(false), err.Error(), "apply failed"
			if s.stopping && !s.aborted {
				v.Detail = ledger.ProofCutAtStop // the run's stop cut the call short (an interrupt's ctx)
			}
			s.rt.Emit(v)
			e.state = stateDone
			s.fail(ApplyFailedError(e.spec.Name, err), false)
			s.advance()
			return
		}
		log.Info("fault applied")
		s.rt.Emit(ev)
		e.state, e.interval = stateVerifying, VerifyFirstInterval
		e.deadline, e.why = VerifyBound(e.spec, s.start, s.rt.Now(), s.timeout)
		s.poll(e)
		s.advance() // the steps waiting for this Apply call
	})
}

// poll calls Verify once; a failed poll is tried again after the next interval unless
// that comes after the bound.
func (s *Sequencer) poll(e *seqEntry) {
	e.timer = nil
	s.call(e, Op{Kind: OpVerify, Deadline: e.deadline}, func(err error) {
		if err == nil {
			ev := s.event(ledger.EventFaultVerified, e)
			ev.Passed = ledger.Bool(true)
			if ev2, ok := e.fault.(Evidencer); ok {
				ev.Detail = ev2.Evidence()
			}
			s.log.Info("fault verified", "fault", e.spec.Name, "evidence", ev.Detail)
			s.rt.Emit(ev)
			e.state = stateHolding
			s.advance()
			return
		}
		e.last = err
		now := s.rt.Now()
		next := now.Add(e.interval)
		switch {
		case s.aborted || s.stopping || e.cut || !now.Before(e.deadline):
			s.giveUp(e)
		case !next.Before(e.deadline):
			e.timer = s.rt.At(e.deadline, func() { s.input(func() { s.giveUp(e) }) })
		default:
			e.interval = NextVerifyInterval(e.interval)
			e.timer = s.rt.At(next, func() { s.input(func() { s.poll(e) }) })
		}
	})
}

// giveUp ends a verification with no proof.
func (s *Sequencer) giveUp(e *seqEntry) {
	if e.state != stateVerifying {
		return
	}
	if e.timer != nil {
		e.timer()
		e.timer = nil
	}
	why := e.why
	switch {
	case s.aborted:
		why = "before the run was aborted"
	case s.stopping:
		why = "before the run ended"
	}
	last := e.last
	if last == nil {
		last = errors.New("chaos: no verification ran")
	}
	s.log.Error("fault not verified", "fault", e.spec.Name, "err", last, "why", why)
	ev := s.event(ledger.EventFaultVerified, e)
	ev.Passed, ev.Error, ev.Detail = ledger.Bool(false), last.Error(), "no proof "+why
	if s.stopping && !s.aborted {
		ev.Detail = ledger.ProofCutAtStop // reports tells an interrupt's cut from a failure by it
	}
	s.rt.Emit(ev)
	e.state = stateDone
	s.fail(NotVerifiedError(why, e.spec.Name, last), false)
}

// revert calls Revert on an applied fault and emits fault_stop.
func (s *Sequencer) revert(e *seqEntry, then func()) {
	e.active, e.state = false, stateReverting
	s.call(e, Op{Kind: OpRevert}, func(err error) {
		e.state = stateDone
		ev := s.event(ledger.EventFaultStop, e)
		if err != nil {
			s.log.Error("fault revert failed", "fault", e.spec.Name, "err", err)
			ev.Error = err.Error()
			s.rt.Emit(ev)
			s.fail(fmt.Errorf("chaos: revert %s: %w", e.spec.Name, err), true)
		} else {
			s.log.Info("fault reverted", "fault", e.spec.Name)
			s.rt.Emit(ev)
		}
		then()
		s.advance()
	})
}

// fail records a failure: the first aborts the run (the others' cancelled steps then
// add no error of their own); a revert's failure is always recorded.
func (s *Sequencer) fail(err error, always bool) {
	if s.aborted && !always {
		return
	}
	s.errs = append(s.errs, err)
	if !s.aborted && !s.stopping {
		s.aborted = true
		s.rt.Cancel()
		s.sweep()
	}
}

// sweep cancels what waits once the run is aborted or stopped: pending steps, and
// proofs between two polls.
func (s *Sequencer) sweep() {
	for _, st := range s.steps {
		if !st.started && st.stop != nil {
			st.stop()
		}
	}
	for _, e := range s.entries {
		if e.state == stateVerifying && !e.inCall {
			s.giveUp(e)
		}
	}
}

// finish, after every input: once the run is aborted, stopped or every step is done,
// and no call is in flight, revert what is still applied, latest first, one at a time.
func (s *Sequencer) finish() {
	if s.finished || s.calls > 0 {
		return
	}
	if !s.final {
		if !s.aborted && !s.stopping && !s.allDone() {
			return
		}
		s.final = true
		for _, e := range s.entries {
			if e.active {
				s.reverting = append(s.reverting, e)
			}
		}
		sort.Slice(s.reverting, func(i, j int) bool { return s.reverting[i].seq > s.reverting[j].seq })
	}
	for len(s.reverting) > 0 {
		e := s.reverting[0]
		s.reverting = s.reverting[1:]
		if e.active {
			s.revert(e, func() {})
			return // the next when this one returns
		}
	}
	if s.calls == 0 {
		s.finished = true
	}
}

func (s *Sequencer) allDone() bool {
	for _, e := range s.entries {
		if e.state != stateDone {
			return false
		}
	}
	return true
}
