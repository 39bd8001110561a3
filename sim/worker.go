package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"pdsoak/kernels"
	"pdsoak/metricnames"
	"pdsoak/server/cli"
	"pdsoak/server/engine"
	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// A simulated worker is the real engine.Core (the scheduler, a simtime backend and the
// engine loop's rules) on the Loop's clock; this file is only its IO. Advance runs when
// the Core asked (a tick, a step's end, a held step's sleep) or when an event reaches
// the process (wake), and again at once after a step ends (there is no inbox to drain).
// The Host lands on the simulated KV links (kvSide) and the legs' streams (wleg).
// The process adds: SIGSTOP (paused) and a loop blocked in bootstrap dials
// (Core.Blocked) hold the events that reach it; a crash drops everything (the
// incarnation drops stale events); failpoints are modelled per process from their terms.
//
// Simplifications: Forward is never slower than its StepTime; a transfer's KV bytes are
// copied when it completes, not frame by frame; a refused bootstrap dial is instant (a
// round costs its pauses) and a dial to a paused process succeeds (the kernel accepts
// it); a request's last tokens do not ride on its Done event.
type worker struct {
	t    *topo
	name string
	role engine.Role
	idx  int
	spec cli.WorkerSpec
	proc // its life; events wait while it is stopped or its loop blocked (heartbeats still run)

	core              *engine.Core
	sched             *scheduler.Scheduler // the Core's
	b                 kernels.Backend
	streams           map[uint64]*wleg
	next              *Timer  // the Core's next Advance
	prefillsCompleted float64 // pdsoak:prefills_completed_total

	fps map[string]*fpState // failpoints this process has seen enabled, by point
	kv  kvSide
}

// fpState is one failpoint of the process: its terms and counters, kept by the
// registry's own rule (failpoint.State: a Disable keeps the counts until the next
// Enable), and the callers it holds (waiters: what a Disable or an Enable lets go).
type fpState struct {
	failpoint.State
	waiters []func()
}

// wleg is one request (a router leg, or a colocated client request) on a worker;
// deliver gets its events already on the far side's schedule.
type wleg struct {
	seq     uint64
	id      string
	deliver func(gen.Event)
	closed  bool
}

func (t *topo) newWorker(name string, role engine.Role, idx int, args []string) (*worker, error) {
	spec, err := cli.WorkerConfig(role, args)
	if err != nil {
		return nil, err
	}
	w := &worker{t: t, name: name, role: role, idx: idx, spec: spec}
	w.busy = func() bool { return w.core.Blocked() }
	return w, w.boot()
}

// boot starts a fresh incarnation: a new Core and backend, nothing in flight. The
// backend is simtime with the worker's profile (tinyref: its measured tiny-cpu one),
// seeded with the worker's --seed, else the scenario's.
func (w *worker) boot() error {
	kc := w.spec.Kernels
	if kc.Backend == kernels.BackendTinyRef {
		kc.Profile = "tiny-cpu"
	}
	kc.Backend = kernels.BackendSimTime
	if !w.spec.SeedSet {
		kc.Seed = uint64(w.t.sc.Seed)
	}
	b, err := kernels.New(kc)
	if err != nil {
		return fmt.Errorf("sim: %s: %w", w.name, err)
	}
	core, err := engine.NewCore(b, engine.CoreConfig{Config: w.spec.Engine, PageSize: w.spec.Kernels.PageSize,
		Pages: w.spec.Pages, Now: w.t.loop.Now, SkipIdleTicks: true}, w)
	if err != nil {
		return fmt.Errorf("sim: %s: %w", w.name, err)
	}
	w.start()
	w.core, w.sched, w.b, w.streams = core, core.Scheduler(), b, map[uint64]*wleg{}
	w.kv.reset(w)
	return nil
}

// wake: an event reached the loop (the engine's inbox wakes it), which advances now;
// during a step's time it was handled on arrival and the loop waits on.
func (w *worker) wake() {
	if w.alive && !w.paused && !w.core.Blocked() && !w.core.Computing() {
		w.arm(w.t.loop.Now())
	}
}

// arm schedules the Core's next Advance at t (zero: none), unless one is due by then.
func (w *worker) arm(t time.Time) {
	if t.IsZero() || (w.next.Pending() && !w.next.at.After(t)) {
		return
	}
	w.t.loop.Stop(w.next)
	inc := w.inc
	w.next = w.t.loop.At(t, func() {
		if inc != w.inc || !w.alive {
			return
		}
		if w.core.Blocked() { // the dials returned: what they held comes first
			w.core.EndBlock()
			w.flush()
		}
		if w.paused {
			w.deferred = append(w.deferred, w.advance)
			return
		}
		w.advance()
	})
}

func (w *worker) advance() {
	now, inc := w.t.loop.Now(), w.inc
	next := w.core.Advance(now)
	for next.Equal(now) && !w.paused && inc == w.inc {
		next = w.core.Advance(now)
	}
	w.arm(next)
}

// The Core's Host.

func (w *worker) StartReceive(t scheduler.Transfer)     { w.kv.startReceive(t) }
func (w *worker) StartSend(s scheduler.Send)            { w.kv.startSend(s) }
func (w *worker) Cancel(room uint64)                    { w.kv.cancel(room) }
func (w *worker) StepEnded()                            {}
func (w *worker) Publish(time.Time, engine.Publication) {}

// WantSnapshot: a change in the live count stands in for a Requests call asking.
func (w *worker) WantSnapshot(live, listed int) bool { return live != listed }

// Dial: a prefill answers while it runs and its link to this worker is not cut.
func (w *worker) Dial(addr string) bool {
	pi := prefillIndex(addr)
	return pi >= 0 && pi < len(w.t.prefill) && w.t.prefill[pi].alive && w.t.links[addr+"->"+w.name].cut == 0
}

func (w *worker) Dialled(down []string) time.Duration {
	return time.Duration(len(down)) * engine.RefusedBootstrapCost
}

// StepBegan is the engine/step failpoint: pause and sleep hold the step until the
// failpoint is disabled (or the sleep ends), return(arg) fails it.
func (w *worker) StepBegan(time.Time) engine.Gate {
	t := w.fire(failpoint.EngineStep)
	switch {
	case t == nil:
	case t.Action == failpoint.ActPause || t.Action == failpoint.ActSleep:
		// The Core ends a sleep itself; a failpoint that lets go ends either at once.
		w.hold(failpoint.EngineStep, t, func() { w.core.Release(nil); w.wake() }, nil)
		return engine.Gate{Hold: true, Sleep: t.Sleep}
	case t.Action == failpoint.ActReturn && t.Arg != "":
		return engine.Gate{Err: engine.StepFailpointError(t.Arg)}
	}
	return engine.Gate{}
}

func (w *worker) Deliver(_ time.Time, rd *scheduler.Ready) {
	for _, em := range rd.Emits {
		if l := w.streams[em.Seq]; l != nil && !l.closed {
			l.deliver(gen.Event{Tokens: em.Tokens})
		}
	}
	for _, f := range rd.Finished {
		if engine.PrefillCompleted(w.role, f) {
			w.prefillsCompleted++
		}
		if l := w.streams[f.Seq]; l != nil {
			delete(w.streams, f.Seq)
			if !l.closed {
				l.closed = true
				l.deliver(engine.DoneEvent(f))
			}
		}
	}
}

// fire evaluates a failpoint of this process (nil: not enabled or nothing fired).
func (w *worker) fire(point string) *failpoint.Term {
	fp := w.fps[point]
	if fp == nil {
		return nil
	}
	return fp.Fire(w.t.draw) // counted as the registry counts (its Status, chaos's proof)
}

// hold keeps a caller of point's term t (a pause or a sleep) as the registry's Eval
// does: counted in Paused or Sleeping until the failpoint lets go of it (Disable, a new
// Enable: let runs) or, for a sleep, t.Sleep passes (slept runs), whichever is first;
// the one that runs is posted to this incarnation. A nil func only ends the hold; so does
// the returned func (the caller's context ending: Eval returns, nothing runs).
func (w *worker) hold(point string, t *failpoint.Term, let, slept func()) (quit func()) {
	fp, inc := w.fps[point], w.inc
	release, done := fp.Hold(t.Action), false
	end := func(fn func()) func() {
		return func() {
			if done {
				return
			}
			done = true
			release()
			if fn != nil {
				w.post(inc, fn)
			}
		}
	}
	fp.waiters = append(fp.waiters, end(let))
	if t.Action == failpoint.ActSleep {
		w.t.loop.After(t.Sleep, end(slept))
	}
	return end(nil)
}

// admit is engine.Generate: the engine/admit failpoint (a return refuses as
// engine.AdmitFailpointError does; sleep and pause hold the admission), then arrive. reply
// gets the outcome, at once or when the hold ends. A hold returns gone, the request's
// client leaving: as the real Eval returns when its context ends, the hold ends then and
// nothing is admitted (nor replied: no one listens).
func (w *worker) admit(req *gen.Request, deliver func(gen.Event), reply func(uint64, error)) (gone func()) {
	t := w.fire(failpoint.EngineAdmit)
	switch {
	case t == nil || (t.Action == failpoint.ActReturn && t.Arg == ""):
	case t.Action == failpoint.ActReturn:
		reply(0, engine.AdmitFailpointError(t.Arg))
		return nil
	case t.Action == failpoint.ActSleep || t.Action == failpoint.ActPause:
		again := func() { reply(w.arrive(req, deliver)) }
		return w.hold(failpoint.EngineAdmit, t, again, again)
	}
	reply(w.arrive(req, deliver))
	return nil
}

// arrive admits a request (engine.admit): the reply is the error, or the stream.
func (w *worker) arrive(req *gen.Request, deliver func(gen.Event)) (uint64, error) {
	seq, err := w.core.Arrive(w.t.loop.Now(), req)
	if err != nil {
		return 0, err
	}
	w.streams[seq] = &wleg{seq: seq, id: req.ID, deliver: deliver}
	w.wake()
	return seq, nil
}

// abort is the client of a leg going away (engine: context.AfterFunc posts an abort).
func (w *worker) abort(seq uint64) {
	if l := w.streams[seq]; l != nil {
		l.closed = true // the connection is gone: nothing more is written to it
	}
	if w.core.Abort(w.t.loop.Now(), seq, engine.ClientGoneError()) {
		w.wake()
	}
}

// healthy is /health: the scheduler's own Health, whose watchdog rule
// (scheduler.WatchdogErr) is the one engine.Healthy applies; requests is /debug/requests
// (the last list, aged to now); gauges is a scrape of /metrics (what the engine publishes).
func (w *worker) healthy() error { return w.sched.Health(w.t.loop.Now()) }

func (w *worker) requests() []gen.RequestInfo {
	p := w.core.Published()
	return engine.AgeRequests(p.Snap, p.SnapTime, w.t.loop.Now())
}

func (w *worker) gauges() map[string]float64 {
	p := w.core.Published()
	g := engine.StatGauges(p.Stats)
	maps.Copy(g, engine.CacheGauges(w.sched.CacheStats())) // live, as the engine publishes them
	g[metricnames.GenThroughput] = p.Rate
	if w.role == engine.RolePrefill {
		g[metricnames.PrefillsCompleted] = w.prefillsCompleted
	}
	return g
}

// crash kills the process: every connection it holds breaks, its state is gone.
func (w *worker) crash() {
	if !w.alive {
		return
	}
	for _, fp := range w.fps {
		fp.waiters = nil
	}
	w.die()
	w.fps = nil             // failpoints live in the process
	w.prefillsCompleted = 0 // a restarted process counts from 0
	w.t.loop.Stop(w.next)
	// Every stream's connection resets (a PD leg's break reaches the router through
	// processDied; a colocated client sees it here).
	for _, seq := range slices.Sorted(maps.Keys(w.streams)) {
		if l := w.streams[seq]; !l.closed {
			l.closed = true
			l.deliver(gen.Event{Done: true, Err: fmt.Errorf("sim: %s: %w", w.name, ErrConnReset)})
		}
	}
	w.streams = map[uint64]*wleg{}
	w.kv.crash()
	w.t.processDied(w.name)
}

// pause freezes the process (SIGSTOP); resume thaws it and delivers what waited.
func (w *worker) pause() {
	if w.stop() {
		w.kv.paused()
	}
}

func (w *worker) resume() {
	if w.cont() {
		w.kv.resumed()
		w.flush()
		w.wake()
	}
}
