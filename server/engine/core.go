package engine

import (
	"fmt"
	"log/slog"
	"time"

	"pdsoak/kernels"
	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// Core is the engine loop as an event-driven state machine: the scheduler, the backend
// and every rule the loop applies between them (when to iterate and tick, retrying
// bootstraps, holding a step on its failpoint, running it for its modelled time, what to
// publish), with its IO behind Host. The engine's loop goroutine drives it with the wall
// clock, its inbox and its sockets; the simulator (sim) drives the same Core on its
// event queue with simulated links. One driver calls it; it is not safe for concurrent
// use.
//
//	for {
//		hand events in as they come: Arrive, Abort, Registered, Received, Sent, Release
//		next := core.Advance(now) // iterate, step, end the step: as far as now allows
//		wait for an event, or until next (zero: for an event only)
//	}
type Core struct {
	sched          *scheduler.Scheduler
	b              kernels.Backend
	host           Host
	now            func() time.Time
	log            *slog.Logger
	tick           time.Duration
	skipIdle       bool
	strict         bool
	retryEveryStep bool

	phase    phase
	until    time.Time       // blocked, held with a sleep, computing: when the phase ends
	rd       scheduler.Ready // the batch in flight (held or computing)
	ready    scheduler.Ready // the round being carried out (a field: Host gets a pointer)
	out      []int
	stepErr  error
	released bool // held: the failpoint let the step go (stepErr: or failed it)
	dialled  bool // a round of dials just ended: this iteration does not dial again
	stepped  bool // a step ended and no iteration has carried its decisions out yet

	pendingBoot []scheduler.Transfer
	thru        Throughput
	lastSnapAt  time.Time
	pub         Published
}

type phase uint8

const (
	phaseIdle    phase = iota // between iterations: waiting for an event or a tick
	phaseBlocked              // in a round of bootstrap dials (BugBootstrapRetryEveryStep)
	phaseHeld                 // a planned batch waits on the engine/step failpoint
	phaseCompute              // the batch ran Forward and takes its modelled step time
)

// CoreConfig is what a Core runs with.
type CoreConfig struct {
	Config              // role and limits
	PageSize, Pages int // the KV pool
	// Now reads the driver's clock (required).
	Now func() time.Time
	// Tick is how often an idle loop re-checks its timeouts (DefaultTickInterval).
	Tick time.Duration
	// SkipIdleTicks: an idle loop with nothing that can expire (no live request, no
	// pending registration, healthy) asks for no tick. The simulator, which need not
	// model empty iterations, sets it; the engine ticks always, keeping gauges live.
	SkipIdleTicks bool
	// Log gets the loop's lines (nil: discarded).
	Log *slog.Logger
}

// Host is a Core's IO, called only from the Core's driver.
type Host interface {
	// StartReceive (decode), StartSend (prefill) and Cancel start or abandon KV
	// transfers, as Transfer's methods do; outcomes come back through Registered,
	// Received and Sent.
	StartReceive(t scheduler.Transfer)
	StartSend(s scheduler.Send)
	Cancel(room uint64)
	// Dial reports whether the bootstrap server at addr answers (BootRetryAttempts
	// dials, BootRetryPause apart). Dialled gets the addresses a round found down and
	// returns how long the round held the loop beyond the time Dial itself took: a real
	// dial blocks (0), a simulated one is instant (RefusedBootstrapCost each).
	Dial(addr string) bool
	Dialled(down []string) time.Duration
	// StepBegan says a batch was planned at at; the Gate is what the engine/step
	// failpoint says about it. StepEnded follows its StepDone.
	StepBegan(at time.Time) Gate
	StepEnded()
	// Deliver carries rd's request decisions to their streams (Emits, then Finished:
	// DoneEvent) and to logs and metrics (Moves, Retracted).
	Deliver(now time.Time, rd *scheduler.Ready)
	// WantSnapshot reports whether a fresh request list is wanted now (live: the live
	// request count, listed: the last list's length); every SnapEvery one is built anyway.
	WantSnapshot(live, listed int) bool
	// Publish gets what an iteration measured.
	Publish(now time.Time, p Publication)
}

// Gate is what the engine/step failpoint says about a planned batch.
type Gate struct {
	// Err fails the step at once (a return(arg) term: StepFailpointError).
	Err error
	// Hold keeps the batch waiting (pause, sleep) until Release, or for Sleep when it is
	// set; the loop keeps serving meanwhile (scheduler_stall).
	Hold  bool
	Sleep time.Duration
}

// Publication is what an iteration publishes.
type Publication struct {
	// Stats are the scheduler's gauges when it refreshed them (nil: frozen this round,
	// SGLang semantics).
	Stats *scheduler.Stats
	// Rate is sglang:gen_throughput when RateOK (Throughput).
	Rate   float64
	RateOK bool
	// Snap is a fresh /debug/requests list, built at now, when SnapOK.
	Snap   []gen.RequestInfo
	SnapOK bool
}

// Published is what the loop published last: what a scrape and /debug/requests read.
type Published struct {
	Stats    scheduler.Stats // as last refreshed (SGLang semantics: frozen in between)
	Rate     float64         // sglang:gen_throughput
	Snap     []gen.RequestInfo
	SnapTime time.Time // when Snap was built (AgeRequests ages it to the reader's now)
}

// NewCore builds the scheduler for cfg over a pool of cfg.Pages pages and returns the
// loop around it and b, idle.
func NewCore(b kernels.Backend, cfg CoreConfig, host Host) (*Core, error) {
	if cfg.Now == nil || host == nil {
		return nil, fmt.Errorf("engine: a core needs a clock and a host")
	}
	limits := cfg.Limits
	limits.PageSize = cfg.PageSize
	info := b.Info()
	s, err := scheduler.New(scheduler.Config{Role: cfg.Role, Limits: limits, Pages: cfg.Pages,
		VocabSize: info.VocabSize, EOS: info.EOS})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	c := &Core{sched: s, b: b, host: host, now: cfg.Now, log: cfg.Log, tick: cfg.Tick, skipIdle: cfg.SkipIdleTicks,
		strict: cfg.Semantics == SemanticsStrict, retryEveryStep: cfg.Bug(scheduler.BugBootstrapRetryEveryStep)}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.tick <= 0 {
		c.tick = DefaultTickInterval
	}
	c.pub.Stats = s.Stats()
	return c, nil
}

// Published is what the loop published last.
func (c *Core) Published() Published { return c.pub }

// Scheduler is the Core's scheduler (read its state from the driver's goroutine only).
func (c *Core) Scheduler() *scheduler.Scheduler { return c.sched }

// Blocked reports a round of bootstrap dials holding the loop (until EndBlock): events
// wait for it.
func (c *Core) Blocked() bool { return c.phase == phaseBlocked }

// Settled reports an idle loop whose decisions are all carried out (no step in
// flight or just ended): with no live request, a draining engine may stop.
func (c *Core) Settled() bool { return c.phase == phaseIdle && !c.stepped }

// Computing reports a batch in its step time (events are handled meanwhile, nothing is
// planned).
func (c *Core) Computing() bool { return c.phase == phaseCompute }

// EndBlock ends a round of dials (Advance does at its end; a driver that must handle
// the events the round held first calls it itself); the next iteration does not dial.
func (c *Core) EndBlock() {
	if c.phase == phaseBlocked {
		c.phase, c.dialled = phaseIdle, true
	}
}

// Release ends a held step: err fails it, nil lets it run. Advance carries it out.
func (c *Core) Release(err error) {
	if c.phase == phaseHeld && !c.released {
		c.released, c.stepErr = true, err
	}
}

// Arrive admits req (or refuses it: the scheduler's error).
func (c *Core) Arrive(now time.Time, req *gen.Request) (uint64, error) {
	return c.sched.Arrive(now, req)
}

// Abort fails request seq with cause; false when it is not live.
func (c *Core) Abort(now time.Time, seq uint64, cause error) bool {
	return c.sched.Abort(now, seq, cause)
}

// Registered (prefill): decode registered room.
func (c *Core) Registered(now time.Time, room uint64) { c.sched.Registered(now, room) }

// Received (decode): the KV of room arrived (err nil) or failed.
func (c *Core) Received(now time.Time, room uint64, tok int, err error) {
	if !c.sched.Received(now, room, tok, err) {
		// Normal after a cancel, a timeout or an abort: the room is gone.
		c.log.Debug("kv transfer ended for no live request", "room", room, "err", err)
	}
}

// Sent (prefill): the KV of room reached decode (err nil) or the send failed.
func (c *Core) Sent(now time.Time, room uint64, err error) {
	if !c.sched.Sent(now, room, err) {
		c.log.Debug("kv sent for no request", "room", room, "err", err)
	}
}

// Advance runs the loop as far as now allows and returns when the driver must call
// again without an event (zero: only on one). It ends a step whose time has come, or
// iterates (a round of dials, Tick, Ready, the decisions carried out) and starts the
// step Ready planned. After a step ends it returns at once (the clock's now): the
// driver handles the events that came meanwhile, then calls again.
func (c *Core) Advance(now time.Time) time.Time {
	switch c.phase {
	case phaseBlocked:
		if now.Before(c.until) {
			return c.until
		}
		c.EndBlock()
	case phaseCompute:
		return c.computing()
	case phaseHeld:
		if c.released || (!c.until.IsZero() && !now.Before(c.until)) {
			return c.run()
		}
		c.iterate(now) // the batch is in flight: nothing is planned, timeouts still run
		return c.heldUntil()
	}
	if len(c.pendingBoot) > 0 && !c.dialled {
		start, keep, down := RetryBootstrap(c.pendingBoot, c.host.Dial)
		for _, t := range start {
			c.host.StartReceive(t)
		}
		c.pendingBoot = keep
		if d := c.host.Dialled(down); d > 0 {
			c.phase, c.until = phaseBlocked, now.Add(d)
			return c.until
		}
	}
	c.dialled = false
	rd := c.iterate(now)
	if rd.Batch == nil {
		if c.skipIdle && c.sched.Live() == 0 && c.sched.Stats().PendingRegistrations == 0 && c.sched.Health(now) == nil {
			return time.Time{}
		}
		return c.now().Add(c.tick)
	}
	c.rd, c.out = *rd, make([]int, len(rd.Batch))
	g := c.host.StepBegan(c.now())
	c.stepErr, c.released, c.until = g.Err, false, time.Time{}
	if g.Hold && g.Err == nil {
		c.phase = phaseHeld
		if g.Sleep > 0 {
			c.until = c.now().Add(g.Sleep)
		}
		return c.heldUntil()
	}
	return c.run()
}

// iterate is one pass without a step: Tick, Ready, the decisions carried out.
func (c *Core) iterate(now time.Time) *scheduler.Ready {
	c.sched.Tick(now)
	c.ready = c.sched.Ready(now)
	c.apply(now, &c.ready)
	c.stepped = false
	return &c.ready
}

// heldUntil is the next serving tick of a held step, or the end of its sleep.
func (c *Core) heldUntil() time.Time {
	next := c.now().Add(c.tick)
	if !c.until.IsZero() && c.until.Before(next) {
		next = c.until
	}
	return next
}

// run computes the batch, unless its gate failed it, and starts its step time.
func (c *Core) run() time.Time {
	if c.stepErr == nil {
		start := c.now()
		if c.stepErr = c.forward(); c.stepErr == nil {
			c.phase, c.until = phaseCompute, start.Add(c.b.StepTime(c.rd.PrefillTokens, c.rd.DecodeTokens))
			return c.computing()
		}
	}
	c.endStep()
	return c.now()
}

// computing ends the step when its time has come (then returns now), else returns when.
func (c *Core) computing() time.Time {
	if now := c.now(); now.Before(c.until) {
		return c.until
	}
	c.endStep()
	return c.now()
}

func (c *Core) forward() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: backend panicked: %v", p)
		}
	}()
	return c.b.Forward(c.rd.Batch, c.out)
}

func (c *Core) endStep() {
	if c.stepErr != nil {
		c.log.Error("forward step failed", "batch", len(c.rd.Batch), "err", c.stepErr)
	}
	c.sched.StepDone(c.now(), c.out, c.stepErr)
	c.stepped = true
	c.host.StepEnded()
	c.phase, c.rd, c.out, c.stepErr, c.until, c.released = phaseIdle, scheduler.Ready{}, nil, nil, time.Time{}, false
}

// apply carries out a round of decisions. Cancels come first: a transfer must stop
// touching pages before they are reused.
func (c *Core) apply(now time.Time, rd *scheduler.Ready) {
	for _, x := range rd.Cancels {
		c.host.Cancel(x.Room)
	}
	var start []scheduler.Transfer
	c.pendingBoot, start = PendBootstraps(c.pendingBoot, rd, c.retryEveryStep)
	for _, t := range start {
		c.host.StartReceive(t)
	}
	for _, s := range rd.Sends {
		c.host.StartSend(s)
	}
	c.host.Deliver(now, rd)
	p := Publication{Stats: rd.Stats}
	p.Rate, p.RateOK = c.thru.Update(now, c.sched.Stats().GeneratedTokens, c.strict || rd.Stats != nil)
	if p.Stats != nil {
		c.pub.Stats = *p.Stats
	}
	if p.RateOK {
		c.pub.Rate = p.Rate
	}
	// The request list costs a sort and an allocation per live request: it is built
	// when asked for, and every SnapEvery as the answer for a loop too stuck to build one.
	if c.host.WantSnapshot(c.sched.Live(), len(c.pub.Snap)) || now.Sub(c.lastSnapAt) >= SnapEvery {
		p.Snap, p.SnapOK = c.Snapshot(now), true
	}
	c.host.Publish(now, p)
}

// Snapshot builds the request list at now (/debug/requests; AgeRequests ages it later).
func (c *Core) Snapshot(now time.Time) []gen.RequestInfo {
	c.lastSnapAt = now
	c.pub.Snap, c.pub.SnapTime = c.sched.Requests(now), now
	return c.pub.Snap
}

// Stop ends the loop: a step in flight ends now (a held one failing with stepErr),
// every live request fails with cause, and the decisions are carried out. It returns
// how many requests it aborted.
func (c *Core) Stop(now time.Time, stepErr, cause error) int {
	switch c.phase {
	case phaseHeld:
		c.stepErr = stepErr
		c.endStep()
	case phaseCompute:
		c.endStep()
	case phaseBlocked:
		c.phase = phaseIdle
	}
	n := c.sched.AbortAll(now, cause)
	c.ready = c.sched.Ready(now)
	c.apply(now, &c.ready)
	c.stepped = false
	return n
}
