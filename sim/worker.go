package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"pdsoak/kernels"
	"pdsoak/metricnames"
	"pdsoak/scenarios"
	"pdsoak/server/cli"
	"pdsoak/server/engine"
	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// A simulated worker is the real engine.Core (the scheduler, a real simtime backend and
// every rule of the engine loop: iterations, ticks, bootstrap retries, held and timed
// steps, what is published) on the Loop's clock. This file is the Core's IO: Advance
// runs when the Core asked for it (a tick, a step's end, a held step's sleep) or when an
// event reaches the process (wake); the Host's calls land on the simulated KV links
// (kvSide), the streams of the router's legs or the client (wleg) and the scrape state.
//
// What the process adds to the engine: SIGSTOP (paused), and a loop blocked in its
// bootstrap dials (Core.Blocked), hold the events that reach it in deferred; a crash
// drops everything, and the incarnation drops stale events; failpoints are modelled per
// process (fps) from their terms, the engine/step one as the Core's Gate. The sim has no
// inbox to drain, so it calls Advance again at once when a step ends.
//
// Simplifications: Forward is never slower than its modelled StepTime; the KV bytes of a
// transfer are copied when the transfer completes rather than frame by frame; the
// bootstrap-retry-every-step bug's refused dials are instant (as through a stopped
// proxy), so a round costs its pauses, and a dial to a paused process succeeds (the
// kernel accepts it); a request's last tokens are not merged into its Done event.
type worker struct {
	t    *topo
	name string
	role engine.Role
	idx  int
	spec cli.WorkerSpec

	inc      int // incarnation: bumped at each crash, so stale events are dropped
	alive    bool
	paused   bool     // SIGSTOP: events that reach the process wait in deferred
	deferred []func() // also while the loop is blocked in dials (its heartbeats run)

	core    *engine.Core
	sched   *scheduler.Scheduler // the Core's
	b       kernels.Backend
	streams map[uint64]*wleg
	next    *Timer // the Core's next Advance

	// What the Core published: the gauges a scrape reads, /debug/requests' list.
	stats             scheduler.Stats
	thru              float64
	prefillsCompleted float64 // pdsoak:prefills_completed_total
	snap              []gen.RequestInfo
	snapTime          time.Time

	// failpoints enabled on this process (by point), modelled faults' chains.
	fps map[string]*fpState

	kv kvSide
}

// fpState is one enabled failpoint: the chain of its terms (counts decremented by
// failpoint.Fire) and the waiters a pause holds.
type fpState struct {
	chain   []failpoint.Term
	waiters []func()
}

// wleg is one request (a router leg, or a colocated client request) on a worker.
type wleg struct {
	seq uint64
	id  string
	// deliver gets the stream's events (tokens, or the Done event), already on the far
	// side's schedule (the router's link, or the client directly).
	deliver func(gen.Event)
	closed  bool
}

func (t *topo) newWorker(name string, role engine.Role, idx int, args []string) (*worker, error) {
	spec, err := cli.WorkerConfig(role, args)
	if err != nil {
		return nil, err
	}
	w := &worker{t: t, name: name, role: role, idx: idx, spec: spec}
	if err := w.boot(); err != nil {
		return nil, err
	}
	return w, nil
}

// simKernels is the backend the simulator runs for a worker: simtime with the worker's
// profile (tinyref maps to its measured tiny-cpu profile), seeded with the worker's
// --seed when given, else with the scenario's seed.
func (w *worker) simKernels() kernels.Config {
	kc := w.spec.Kernels
	if kc.Backend == kernels.BackendTinyRef {
		kc.Profile = "tiny-cpu"
	}
	kc.Backend = kernels.BackendSimTime
	if !w.spec.SeedSet {
		kc.Seed = uint64(w.t.sc.Seed)
	}
	return kc
}

// boot starts a fresh incarnation: a new Core and backend, nothing in flight.
func (w *worker) boot() error {
	b, err := kernels.New(w.simKernels())
	if err != nil {
		return fmt.Errorf("sim: %s: %w", w.name, err)
	}
	core, err := engine.NewCore(b, engine.CoreConfig{Config: w.spec.Engine, PageSize: w.spec.Kernels.PageSize,
		Pages: w.spec.Pages, Now: w.t.loop.Now, SkipIdleTicks: true}, w)
	if err != nil {
		return fmt.Errorf("sim: %s: %w", w.name, err)
	}
	w.inc++
	w.alive, w.paused, w.deferred = true, false, nil
	w.core, w.sched, w.b, w.streams = core, core.Scheduler(), b, map[uint64]*wleg{}
	w.stats, w.thru, w.snap, w.snapTime = w.sched.Stats(), 0, nil, time.Time{}
	w.kv.reset(w)
	return nil
}

// post runs fn on the worker's process: at once when it runs, later when it is paused
// or its loop blocked (SIGCONT delivers what the kernel buffered), never when it died since.
func (w *worker) post(inc int, fn func()) {
	switch {
	case !w.alive || inc != w.inc:
	case w.paused || w.core.Blocked():
		w.deferred = append(w.deferred, fn)
	default:
		fn()
	}
}

// wake: an event reached the loop (the engine's inbox wakes it), which advances now.
func (w *worker) wake() {
	if w.alive && !w.paused && !w.core.Blocked() {
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
		if w.core.Blocked() { // the dials returned: the events they held come first
			w.core.EndBlock()
			w.flush()
		}
		w.post(inc, w.advance)
	})
}

// advance runs the Core until it waits; a step that ended lets it go on at once.
func (w *worker) advance() {
	now, inc := w.t.loop.Now(), w.inc
	next := w.core.Advance(now)
	for next.Equal(now) && !w.paused && inc == w.inc {
		next = w.core.Advance(now)
	}
	w.arm(next)
}

// The Core's Host: transfers on the simulated KV links.

func (w *worker) StartReceive(t scheduler.Transfer) { w.kv.startReceive(t) }
func (w *worker) StartSend(s scheduler.Send)        { w.kv.startSend(s) }
func (w *worker) Cancel(room uint64)                { w.kv.cancel(room) }

// Dial: a prefill answers while it runs and its link to this worker is not cut.
func (w *worker) Dial(addr string) bool {
	pi := prefillIndex(addr)
	return pi >= 0 && pi < len(w.t.prefill) && w.t.prefill[pi].alive && w.t.links[addr+"->"+w.name].cut == 0
}

// Dialled: a refused dial is instant, so a round costs the pauses between attempts.
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
		fp, inc := w.fps[failpoint.EngineStep], w.inc
		fp.waiters = append(fp.waiters, func() { w.post(inc, func() { w.core.Release(nil); w.wake() }) })
		return engine.Gate{Hold: true, Sleep: t.Sleep}
	case t.Action == failpoint.ActReturn && t.Arg != "":
		return engine.Gate{Err: engine.StepFailpointError(t.Arg)}
	}
	return engine.Gate{}
}

func (w *worker) StepEnded() {}

// Deliver sends the round's tokens and Done events down the legs' streams.
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

// WantSnapshot: a change in the live count stands in for a Requests call asking.
func (w *worker) WantSnapshot(live int) bool { return live != len(w.snap) }

func (w *worker) Publish(now time.Time, p engine.Publication) {
	if p.Stats != nil {
		w.stats = *p.Stats
	}
	if p.RateOK {
		w.thru = p.Rate
	}
	if p.SnapOK {
		w.snap, w.snapTime = p.Snap, now
	}
}

// fire evaluates a failpoint enabled on this process (nil: not enabled or nothing fired).
func (w *worker) fire(point string) *failpoint.Term {
	fp := w.fps[point]
	if fp == nil {
		return nil
	}
	t := failpoint.Fire(fp.chain, w.t.draw)
	if t == nil || t.Action == failpoint.ActOff {
		return nil
	}
	return t
}

// admit is engine.Generate: the engine/admit failpoint (a return refuses as
// engine.AdmitFailpointError does; sleep and pause hold the admission), then arrive. reply
// gets the outcome, at once or when the hold ends; held reports a hold.
func (w *worker) admit(req *gen.Request, deliver func(gen.Event), reply func(uint64, error)) (held bool) {
	t := w.fire(failpoint.EngineAdmit)
	if t == nil || (t.Action == failpoint.ActReturn && t.Arg == "") {
		reply(w.arrive(req, deliver))
		return false
	}
	inc := w.inc
	again := func() { w.post(inc, func() { reply(w.arrive(req, deliver)) }) }
	switch t.Action {
	case failpoint.ActReturn:
		reply(0, engine.AdmitFailpointError(t.Arg))
		return false
	case failpoint.ActSleep:
		w.t.loop.After(t.Sleep, again)
		return true
	case failpoint.ActPause:
		fp := w.fps[failpoint.EngineAdmit]
		fp.waiters = append(fp.waiters, again)
		return true
	}
	reply(w.arrive(req, deliver))
	return false
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

// healthy is the worker's /health (engine.Healthy, from the scheduler's own Health).
func (w *worker) healthy() error {
	return w.sched.Health(w.t.loop.Now())
}

// requests is /debug/requests: the last snapshot aged to now.
func (w *worker) requests() []gen.RequestInfo {
	return engine.AgeRequests(w.snap, w.snapTime, w.t.loop.Now())
}

// gauges is what a scrape of the worker's /metrics reads (engine.StatGauges and the
// throughput).
func (w *worker) gauges() map[string]float64 {
	g := engine.StatGauges(w.stats)
	maps.Copy(g, engine.CacheGauges(w.sched.CacheStats())) // live, as the engine publishes them
	g[metricnames.GenThroughput] = w.thru
	if w.role == engine.RolePrefill {
		g[scenarios.ReferencePrefillCounter] = w.prefillsCompleted
	}
	return g
}

// crash kills the process: every connection it holds breaks, its state is gone.
func (w *worker) crash() {
	if !w.alive {
		return
	}
	w.alive = false
	w.inc++
	w.prefillsCompleted = 0 // a restarted process counts from 0
	w.t.loop.Stop(w.next)
	w.deferred = nil
	for _, fp := range w.fps {
		fp.waiters = nil
	}
	w.fps = nil // failpoints live in the process
	// Every stream's connection resets (a PD leg's break reaches the router through
	// processDied; a colocated client sees it here).
	seqs := make([]uint64, 0, len(w.streams))
	for seq := range w.streams {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
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
	if !w.alive || w.paused {
		return
	}
	w.paused = true
	w.kv.paused()
}

func (w *worker) resume() {
	if !w.alive || !w.paused {
		return
	}
	w.paused = false
	w.kv.resumed()
	w.flush()
	w.wake()
}

// flush runs the events that waited while the process was paused or blocked.
func (w *worker) flush() {
	d := w.deferred
	w.deferred = nil
	for i, fn := range d {
		if !w.alive {
			return
		}
		if w.paused || w.core.Blocked() {
			w.deferred = append(w.deferred, d[i:]...)
			return
		}
		fn()
	}
}
