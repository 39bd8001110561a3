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

// A simulated worker is the real scheduler.Scheduler and a real simtime backend driven
// by a driver that does what server/engine's loop does, on the Loop's clock:
//
//   - An iteration (engine.loop) is Tick, Ready, apply; when Ready plans a batch, the
//     step evaluates the engine/step failpoint (scheduler_stall), runs Forward on the
//     backend at once (it writes real KV bytes and samples from them), waits the
//     backend's StepTime (the profile's β's with the seeded jitter of the real simtime
//     backend), then calls StepDone and iterates again at once.
//   - Inbox events (arrivals, aborts, registrations, KV results) call the scheduler when
//     they arrive, also during a step (engine.waitUntil handles the inbox then too),
//     and wake an idle worker for an iteration at the same instant.
//   - An idle worker ticks every engine.DefaultTickInterval, as the engine does, but
//     only while something can expire (live requests, pending registrations, an
//     unhealthy watchdog state); with nothing in flight it sleeps until an event.
//   - While a stalled step holds (failpoint pause or sleep), it iterates every tick
//     without planning (engine.serveDuringStall): timeouts still answer clients.
//   - Gauges are the scheduler's Stats as published by Ready (so SGLang semantics'
//     frozen decode gauges come from the scheduler itself); /debug/requests answers
//     from a snapshot refreshed as engine.publish does (every 50ms or when the live
//     count changes), aged to now.
//
// Simplifications: Forward is never slower than its modelled StepTime (the step's real
// compute is not timed); the KV bytes of a transfer are copied when the transfer
// completes rather than frame by frame; the bootstrap-retry-every-step bug's blocking
// dials cost their pauses (a refused dial is instant, as through a stopped proxy) and a
// dial to a paused process succeeds (the kernel accepts it).
type worker struct {
	t    *topo
	name string
	role engine.Role
	idx  int
	spec cli.WorkerSpec

	inc   int // incarnation: bumped at each crash, so stale events are dropped
	alive bool
	// paused: SIGSTOP; events that reach the process wait in deferred. blocked: the
	// loop is stuck in blocking bootstrap dials (BugBootstrapRetryEveryStep): inbox
	// events wait in deferred too, but the process's other goroutines (heartbeats) run.
	paused, blocked bool
	deferred        []func()
	// pendingBoot are transfers waiting for their bootstrap server to answer
	// (BugBootstrapRetryEveryStep), and dialled is set for the iteration that follows
	// a round of dials.
	pendingBoot []scheduler.Transfer
	dialled     bool

	sched   *scheduler.Scheduler
	b       kernels.Backend
	streams map[uint64]*wleg

	kick, tick *Timer
	stepping   bool
	stepStart  time.Time
	stepOut    []int
	stepTimer  *Timer
	// held: the planned batch waits on the engine/step failpoint (pause until
	// revert, or sleep until heldUntil).
	held      bool
	heldUntil *Timer

	stats scheduler.Stats
	// prefillsCompleted is pdsoak:prefills_completed_total (prefill: KV reached decode).
	prefillsCompleted float64
	// gen_throughput as engine.publish computes it.
	thru       float64
	thruMeter  engine.Throughput
	snap       []gen.RequestInfo
	snapTime   time.Time
	lastSnapAt time.Time
	lastOutput time.Time // engine.outputAt

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

// boot starts a fresh incarnation: a new scheduler and backend, nothing in flight.
func (w *worker) boot() error {
	b, err := kernels.New(w.simKernels())
	if err != nil {
		return fmt.Errorf("sim: %s: %w", w.name, err)
	}
	limits := w.spec.Engine.Limits
	limits.PageSize = w.spec.Kernels.PageSize
	info := b.Info()
	s, err := scheduler.New(scheduler.Config{Role: w.role, Limits: limits, Pages: w.spec.Pages,
		VocabSize: info.VocabSize, EOS: info.EOS})
	if err != nil {
		return fmt.Errorf("sim: %s: %w", w.name, err)
	}
	w.inc++
	w.alive, w.paused, w.blocked, w.deferred = true, false, false, nil
	w.pendingBoot, w.dialled = nil, false
	w.sched, w.b, w.streams = s, b, map[uint64]*wleg{}
	w.stepping, w.held, w.stepOut = false, false, nil
	w.stats = s.Stats()
	w.thru, w.thruMeter = 0, engine.Throughput{}
	w.snap, w.snapTime, w.lastSnapAt = nil, time.Time{}, time.Time{}
	w.lastOutput = w.t.loop.Now()
	w.kv.reset(w)
	return nil
}

// post runs fn on the worker's process: at once when it runs, later when it is paused
// (SIGCONT delivers what the kernel buffered), never when it died since.
func (w *worker) post(inc int, fn func()) {
	switch {
	case !w.alive || inc != w.inc:
	case w.paused || w.blocked:
		w.deferred = append(w.deferred, fn)
	default:
		fn()
	}
}

// wake asks for an iteration at this instant (engine: the inbox wakes the loop). During
// a step the event was handled; the loop iterates when the step ends.
func (w *worker) wake() {
	if w.stepping || w.kick.Pending() || w.paused || w.blocked || !w.alive {
		return
	}
	w.t.loop.Stop(w.tick)
	inc := w.inc
	w.kick = w.t.loop.After(0, func() { w.post(inc, w.iterate) })
}

// iterate is one pass of engine.loop without a batch in flight.
func (w *worker) iterate() {
	if w.stepping || w.blocked {
		return // the events were handled; the loop goes on when the step or dials end
	}
	if len(w.pendingBoot) > 0 && !w.dialled {
		if d := w.retryBootstrap(); d > 0 {
			// The loop is blocked in its dials: nothing else runs on it meanwhile.
			w.blocked = true
			w.t.loop.Stop(w.tick)
			inc := w.inc
			w.t.loop.After(d, func() {
				if inc != w.inc || !w.alive {
					return
				}
				w.blocked, w.dialled = false, true
				w.flush()
				if !w.paused && !w.stepping && !w.blocked {
					w.iterate()
				}
			})
			return
		}
	}
	w.dialled = false
	now := w.t.loop.Now()
	w.sched.Tick(now)
	rd := w.sched.Ready(now)
	w.apply(now, rd)
	if rd.Batch != nil {
		w.step(&rd)
		return
	}
	w.idle()
}

// retryBootstrap is engine.RetryBootstrap on the simulated links: it starts the pending
// transfers whose prefill answers a dial and returns how long the loop was blocked
// dialling the others; a refused dial (process down, link partitioned) costs only the
// pauses between attempts (engine.RefusedBootstrapCost).
func (w *worker) retryBootstrap() time.Duration {
	start, keep, down := engine.RetryBootstrap(w.pendingBoot, func(addr string) bool {
		pi := prefillIndex(addr)
		return pi >= 0 && pi < len(w.t.prefill) && w.t.prefill[pi].alive && w.t.links[addr+"->"+w.name].cut == 0
	})
	for _, tr := range start {
		w.kv.startReceive(tr)
	}
	w.pendingBoot = keep
	return time.Duration(len(down)) * engine.RefusedBootstrapCost
}

// idle schedules the next tick when something can expire.
func (w *worker) idle() {
	now := w.t.loop.Now()
	st := w.sched.Stats()
	if w.sched.Live() == 0 && st.PendingRegistrations == 0 && w.sched.Health(now) == nil {
		return
	}
	w.t.loop.Stop(w.tick)
	inc := w.inc
	w.tick = w.t.loop.After(engine.DefaultTickInterval, func() { w.post(inc, w.iterate) })
}

// step runs the planned batch: the engine/step failpoint, Forward, the step time.
func (w *worker) step(rd *scheduler.Ready) {
	w.stepping = true
	w.stepStart = w.t.loop.Now()
	if t := w.fire(failpoint.EngineStep); t != nil {
		switch t.Action {
		case failpoint.ActPause:
			w.hold(rd, 0)
			return
		case failpoint.ActSleep:
			w.hold(rd, t.Sleep)
			return
		case failpoint.ActReturn:
			if t.Arg != "" {
				w.finishStep(nil, engine.StepFailpointError(t.Arg))
				return
			}
		}
	}
	w.compute(rd)
}

// hold keeps the batch in flight on a stalled step (pause: until the failpoint is
// disabled; sleep: for d or until then), serving the inbox and timeouts every tick.
func (w *worker) hold(rd *scheduler.Ready, d time.Duration) {
	w.held = true
	batch := *rd
	inc := w.inc
	resume := func() {
		if !w.held || inc != w.inc {
			return
		}
		w.held = false
		w.t.loop.Stop(w.heldUntil)
		w.t.loop.Stop(w.tick)
		w.stepStart = w.t.loop.Now()
		w.compute(&batch)
	}
	if fp := w.fps[failpoint.EngineStep]; fp != nil {
		fp.waiters = append(fp.waiters, func() { w.post(inc, resume) })
	}
	if d > 0 {
		w.heldUntil = w.t.loop.After(d, func() { w.post(inc, resume) })
	}
	w.serveHeld()
}

// serveHeld is engine.serveDuringStall, every tick while the step is held.
func (w *worker) serveHeld() {
	inc := w.inc
	w.tick = w.t.loop.After(engine.DefaultTickInterval, func() {
		w.post(inc, func() {
			if !w.held {
				return
			}
			now := w.t.loop.Now()
			w.sched.Tick(now)
			w.apply(now, w.sched.Ready(now))
			w.serveHeld()
		})
	})
}

func (w *worker) compute(rd *scheduler.Ready) {
	out := make([]int, len(rd.Batch))
	err := w.b.Forward(rd.Batch, out)
	if err != nil {
		err = fmt.Errorf("engine: %w", err)
		w.finishStep(out, err)
		return
	}
	d := w.b.StepTime(rd.PrefillTokens, rd.DecodeTokens)
	w.stepOut = out
	inc := w.inc
	w.stepTimer = w.t.loop.After(d, func() { w.post(inc, func() { w.finishStep(w.stepOut, nil) }) })
}

func (w *worker) finishStep(out []int, err error) {
	w.stepping = false
	w.stepOut = nil
	w.sched.StepDone(w.t.loop.Now(), out, err)
	w.iterate()
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

// apply carries out the scheduler's decisions (engine.apply).
func (w *worker) apply(now time.Time, rd scheduler.Ready) {
	for _, c := range rd.Cancels {
		w.kv.cancel(c.Room)
	}
	var start []scheduler.Transfer
	w.pendingBoot, start = engine.PendBootstraps(w.pendingBoot, &rd, w.spec.Engine.Bug(scheduler.BugBootstrapRetryEveryStep))
	for _, tr := range start {
		w.kv.startReceive(tr)
	}
	for _, s := range rd.Sends {
		w.kv.startSend(s)
	}
	for _, em := range rd.Emits {
		if l := w.streams[em.Seq]; l != nil && !l.closed {
			l.deliver(gen.Event{Tokens: em.Tokens})
		}
	}
	for _, f := range rd.Finished {
		l := w.streams[f.Seq]
		if l == nil {
			continue
		}
		delete(w.streams, f.Seq)
		if f.Err == nil && w.role == engine.RolePrefill {
			w.prefillsCompleted++
		}
		if !l.closed {
			l.closed = true
			l.deliver(gen.Event{Done: true, Finish: f.Reason, Err: f.Err, PromptTokens: f.PromptTokens, CompletionTokens: f.CompletionTokens})
		}
	}
	if t := w.sched.LastOutput(); !t.IsZero() {
		w.lastOutput = t
	}
	if rd.Stats != nil {
		w.stats = *rd.Stats
	}
	strict := w.sched.Config().Semantics == scheduler.SemanticsStrict
	if rate, ok := w.thruMeter.Update(now, w.sched.Stats().GeneratedTokens, strict || rd.Stats != nil); ok {
		w.thru = rate
	}
	// A change in the live count stands in for a Requests call asking for a fresh list.
	if live := w.sched.Live(); now.Sub(w.lastSnapAt) >= engine.SnapEvery || live != len(w.snap) {
		w.snap = w.sched.Requests(now)
		w.snapTime, w.lastSnapAt = now, now
	}
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
	seq, err := w.sched.Arrive(w.t.loop.Now(), req)
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
	if w.sched.Abort(w.t.loop.Now(), seq, engine.ClientGoneError()) {
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
	for _, tm := range []*Timer{w.kick, w.tick, w.stepTimer, w.heldUntil} {
		w.t.loop.Stop(tm)
	}
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
	if !w.stepping {
		w.wake()
	}
}

// flush runs the events that waited while the process was paused or blocked.
func (w *worker) flush() {
	d := w.deferred
	w.deferred = nil
	for i, fn := range d {
		if !w.alive {
			return
		}
		if w.paused || w.blocked {
			w.deferred = append(w.deferred, d[i:]...)
			return
		}
		fn()
	}
}
