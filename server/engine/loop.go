package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// streamBuffer is the per-request channel capacity; a client slower than the engine
// gets its tokens coalesced into fewer events instead of blocking the loop. One slot is
// kept for the Done event.
const streamBuffer = 8

// stream is the engine side of one request's event channel. Only the loop touches it,
// and the loop only ever sends on ch: it never takes events back, because a receive
// racing the client's own reads would reorder tokens.
type stream struct {
	seq     uint64
	id      string
	ch      chan gen.Event
	stop    func() bool
	arrived time.Time
	lastTok time.Time
	first   bool
	pending []int // tokens not yet delivered: the channel had no free token slot
	ending  bool  // finishes in the round being applied: its tokens ride on Done
}

// push delivers toks without ever blocking: they go out at once when a token slot is
// free (all but the channel's last slot, which is kept for Done), else they wait in
// pending, in order, and leave merged into one event with the next push or flush.
// It reports whether tokens are still pending.
func (s *stream) push(toks []int) bool {
	if len(s.pending) == 0 && len(s.ch) < cap(s.ch)-1 {
		s.ch <- gen.Event{Tokens: toks}
		return false
	}
	s.pending = append(s.pending, toks...)
	return !s.flush()
}

// flush sends the pending tokens as one event when a token slot is free; true when
// nothing is pending any more. Only the loop sends, and the client can only make room,
// so the send cannot block.
func (s *stream) flush() bool {
	if len(s.pending) == 0 {
		return true
	}
	if len(s.ch) >= cap(s.ch)-1 {
		return false
	}
	s.ch <- gen.Event{Tokens: s.pending}
	s.pending = nil
	return true
}

// end sends done, carrying any pending tokens ahead of its own, and closes the channel.
// It never blocks: push and flush leave the last slot free.
func (s *stream) end(done gen.Event) {
	if len(s.pending) > 0 {
		done.Tokens = append(s.pending, done.Tokens...)
		s.pending = nil
	}
	s.ch <- done
	close(s.ch)
}

func (e *Engine) loop() {
	defer close(e.done)
	drainReq := e.drainReq
	e.log.Info("engine started", "semantics", string(e.cfg.Semantics), "pages", e.res.pages, "page_size", e.res.pageSize,
		"max_running", e.cfg.MaxRunningRequests, "max_queued", e.cfg.MaxQueuedRequests, "model", e.info.Name)
	for {
		now := e.clock.Now()
		select {
		case <-drainReq:
			e.draining, drainReq = true, nil
			e.log.Info("engine draining", "live", e.sched.Live())
		default:
		}
		e.handleInbox(now)
		select {
		case <-e.forceReq:
			stepErr := fmt.Errorf("engine: step interrupted: %w", context.Canceled)
			if e.gate != nil { // a held step: Shutdown cancelled loopCtx, so its evaluation returns
				if err := (<-e.gate).fate(); err != nil {
					stepErr = err
				}
				e.gate = nil
			}
			n := e.core.Stop(now, stepErr, fmt.Errorf("engine: shut down before the request finished: %w", gen.ErrAborted))
			e.rejectInbox()
			e.log.Warn("engine stopped with requests in flight", "aborted", n)
			return
		default:
		}
		if e.core.Computing() && e.snapWant.Load() { // Requests is waiting: answer it mid-step
			e.snapMu.Lock()
			e.snapWant.Store(false)
			e.refreshSnapLocked(now)
			e.snapMu.Unlock()
		}
		next := e.core.Advance(now)
		if e.draining && e.core.Settled() && e.sched.Live() == 0 {
			e.rejectInbox()
			e.log.Info("engine stopped")
			return
		}
		var timer <-chan time.Time
		if !next.IsZero() {
			d := next.Sub(e.clock.Now())
			if d <= 0 {
				continue
			}
			timer = e.clock.After(d)
		}
		select {
		case <-e.wake:
		case <-timer:
		case r := <-e.gate:
			e.gate = nil
			e.core.Release(r.fate())
		case <-drainReq:
		case <-e.forceReq:
		}
	}
}

// rejectInbox answers arrivals still queued when the loop exits.
func (e *Engine) rejectInbox() {
	e.mu.Lock()
	evs := e.inbox
	e.inbox = nil
	e.mu.Unlock()
	for _, ev := range evs {
		if a, ok := ev.(*arrival); ok {
			a.reply <- admitResult{err: fmt.Errorf("engine: shutting down: %w", gen.ErrUnavailable)}
		}
	}
}

func (e *Engine) handleInbox(now time.Time) {
	e.mu.Lock()
	evs := e.inbox
	e.inbox = nil
	e.mu.Unlock()
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *arrival:
			e.admit(now, ev)
		case abortEv:
			e.core.Abort(now, ev.seq, ev.cause)
		case registeredEv:
			e.core.Registered(now, ev.room)
		case receivedEv:
			e.core.Received(now, ev.room, ev.tok, ev.err)
		case sentEv:
			e.core.Sent(now, ev.room, ev.err)
		}
	}
}

func (e *Engine) admit(now time.Time, a *arrival) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gone {
		return
	}
	if e.draining {
		a.reply <- admitResult{err: fmt.Errorf("engine: shutting down: %w", gen.ErrUnavailable)}
		return
	}
	if err := a.ctx.Err(); err != nil {
		a.reply <- admitResult{err: fmt.Errorf("engine: admission: %w: %w", gen.ErrAborted, err)}
		return
	}
	seq, err := e.core.Arrive(now, a.req)
	if err != nil {
		e.m.refused.WithLabelValues(gen.ErrorKind(err)).Inc()
		// The API logs the refusal (rate-limited under overload); this is the detail.
		e.log.Debug("request refused", "rid", a.req.ID, "err", err)
		a.reply <- admitResult{err: err}
		return
	}
	st := &stream{seq: seq, id: a.req.ID, ch: make(chan gen.Event, streamBuffer), arrived: now}
	st.stop = context.AfterFunc(a.ctx, func() {
		e.post(abortEv{seq: seq, cause: ClientGoneError()})
	})
	e.streams[seq] = st
	if e.cfg.Role == RoleDecode && a.req.DecodeOnly {
		e.m.localPrefills.Inc()
	}
	e.live.Store(int64(e.sched.Live())) // before the reply: Generate's caller sees it in flight
	// The attributes cost allocations: only when the line is written.
	if e.log.Enabled(context.Background(), slog.LevelInfo) {
		attrs := []any{"rid", a.req.ID, "seq", seq, "prompt_tokens", len(a.req.Prompt), "max_tokens", a.req.MaxTokens}
		if a.req.Bootstrap != nil {
			attrs = append(attrs, "room", a.req.Bootstrap.Room, "bootstrap_addr", a.req.Bootstrap.Addr)
		}
		e.log.Info("request admitted", attrs...)
	}
	a.reply <- admitResult{seq: seq, ch: st.ch}
}

// deliver carries a round's request decisions to the streams, the logs and the metrics
// (Host.Deliver; the Core has started and cancelled its transfers).
func (e *Engine) deliver(now time.Time, rd *scheduler.Ready) {
	if len(rd.Moves) > 0 && e.log.Enabled(context.Background(), slog.LevelInfo) {
		for _, mv := range rd.Moves {
			if mv.From != "" && mv.To != "" {
				e.log.Info("request stage", "rid", mv.ID, "seq", mv.Seq, "from", string(mv.From), "to", string(mv.To))
			}
		}
	}
	if n := len(rd.Retracted); n > 0 {
		e.m.retractions.Add(float64(n))
		// Under KV pressure this repeats every few steps: at most one line per
		// retractLogEvery, counting every retraction since the previous line.
		e.retractsUnlogged += n
		if e.retractLog.AllowN(now, 1) {
			e.log.Warn("kv pool exhausted: requests retracted", "count", e.retractsUnlogged)
			e.retractsUnlogged = 0
		}
	}
	for seq, st := range e.behind { // clients that were behind may have read since
		if st.flush() {
			delete(e.behind, seq)
		}
	}
	// A request that finishes well in this round gets its last tokens in its Done event:
	// one event (one chunk on the wire) fewer per request, and they arrive no later. (A
	// failing one keeps them apart: tokens already out decide what the router may retry.)
	for _, f := range rd.Finished {
		if st := e.streams[f.Seq]; st != nil && f.Err == nil {
			st.ending = true
		}
	}
	for _, em := range rd.Emits {
		st := e.streams[em.Seq]
		if st == nil {
			continue
		}
		e.observeTokens(now, st, len(em.Tokens))
		if st.ending {
			st.pending = append(st.pending, em.Tokens...)
			continue
		}
		if st.push(em.Tokens) {
			e.behind[em.Seq] = st
		}
	}
	for _, f := range rd.Finished {
		e.finish(now, f)
	}
}

func (e *Engine) observeTokens(now time.Time, st *stream, n int) {
	if n == 0 {
		return
	}
	if !st.first {
		st.first = true
		e.m.ttft.Observe(now.Sub(st.arrived).Seconds())
	} else {
		e.m.itl.Observe(now.Sub(st.lastTok).Seconds())
	}
	st.lastTok = now
	e.m.genTokens.Add(float64(n))
}

func (e *Engine) finish(now time.Time, f scheduler.Finish) {
	e.m.requests.Inc()
	e.m.promptTokens.Add(float64(f.PromptTokens))
	e.m.e2e.Observe(f.Age.Seconds())
	outcome := f.Reason
	if f.Err != nil {
		outcome = gen.ErrorKind(f.Err)
		var se *gen.StageError
		isStage := errors.As(f.Err, &se)
		switch {
		case errors.Is(f.Err, gen.ErrAborted):
			e.m.aborts.Inc()
		case isStage && errors.Is(f.Err, gen.ErrTimeout):
			e.m.timeouts.WithLabelValues(se.Stage).Inc()
		}
		if errors.Is(f.Err, gen.ErrTransfer) {
			e.m.transferFailed.Inc()
		}
		if f.Stage == scheduler.StageBootstrap && !errors.Is(f.Err, gen.ErrAborted) {
			e.m.bootstrapFailed.Inc()
		}
	}
	e.m.finished.WithLabelValues(outcome).Inc()
	if PrefillCompleted(e.cfg.Role, f) {
		e.m.prefillsCompleted.Inc()
	}
	level := slog.LevelInfo
	if f.Err != nil && !errors.Is(f.Err, gen.ErrAborted) {
		level = slog.LevelWarn
	}
	if e.log.Enabled(context.Background(), level) {
		e.log.Log(context.Background(), level, "request finished", "rid", f.ID, "seq", f.Seq, "stage", string(f.Stage),
			"finish", f.Reason, "err", f.Err, "prompt_tokens", f.PromptTokens, "completion_tokens", f.CompletionTokens,
			"age", f.Age.Round(time.Millisecond))
	}
	st := e.streams[f.Seq]
	if st == nil {
		return
	}
	delete(e.streams, f.Seq)
	delete(e.behind, f.Seq)
	st.stop()
	st.end(DoneEvent(f))
}

// publish refreshes gauges (when the scheduler says so), throughput and the snapshots
// other goroutines read (Host.Publish).
func (e *Engine) publish(now time.Time, p Publication) {
	e.live.Store(int64(e.sched.Live()))
	e.progressAt.Store(e.sched.LastProgress().UnixNano())
	if t := e.sched.LastOutput(); !t.IsZero() {
		e.outputAt.Store(t.UnixNano())
	}
	if p.Stats != nil {
		e.m.setStats(*p.Stats)
	}
	e.m.setCache(e.sched.CacheStats())
	if p.RateOK {
		e.m.genThroughput.Set(p.Rate)
	}
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	if p.Stats != nil {
		e.stats = *p.Stats
	}
	if p.SnapOK {
		e.setSnapLocked(now, p.Snap)
	}
	e.schedErr = e.sched.Health(now)
}

// refreshSnapLocked rebuilds the request list and tells the Requests calls waiting for it.
func (e *Engine) refreshSnapLocked(now time.Time) { e.setSnapLocked(now, e.core.Snapshot(now)) }

// setSnapLocked publishes snap, built at now, and tells the Requests calls waiting for it.
func (e *Engine) setSnapLocked(now time.Time, snap []gen.RequestInfo) {
	e.snap, e.snapTime = snap, now
	close(e.snapDone)
	e.snapDone = make(chan struct{})
}

// stepBegan (Host.StepBegan) marks the step for the watchdog and evaluates the
// engine/step failpoint. When it is enabled the evaluation runs on its own goroutine
// and the step is held until it returns (the loop's select hands its answer to
// Core.Release): the loop keeps serving meanwhile, arrivals are admitted and queue up,
// timeouts and the watchdog run, but nothing steps (scheduler_stall).
func (e *Engine) stepBegan(at time.Time) Gate {
	e.stepAt.Store(at.UnixNano())
	if st, ok := failpoint.Get(failpoint.EngineStep); !ok || !st.Enabled {
		return Gate{}
	}
	ch := make(chan gateResult, 1)
	go func() {
		arg, err := failpoint.Eval(e.loopCtx, failpoint.EngineStep)
		ch <- gateResult{arg, err}
	}()
	e.gate = ch
	return Gate{Hold: true}
}

// gateResult is what the engine/step failpoint's evaluation returned.
type gateResult struct {
	arg string
	err error
}

// fate is what happens to the held step: nil runs it.
func (r gateResult) fate() error {
	switch {
	case r.err != nil:
		return fmt.Errorf("engine: step interrupted: %w", r.err)
	case r.arg != "":
		return StepFailpointError(r.arg)
	}
	return nil
}

// dialled logs a round of BugBootstrapRetryEveryStep (sgl-project/sglang PRs #19900 and
// #20785): the dials ran on the loop goroutine, blocking it, so an unreachable prefill
// bootstrap server stalls every step of this decode worker, for everyone.
func (e *Engine) dialled(down []string) time.Duration {
	for _, addr := range down {
		e.log.Warn("bootstrap server unreachable; retrying on the next step (sglang#19900 reproduced)", "addr", addr)
	}
	return 0 // the dials blocked the loop already
}

// dialable tries to open a TCP connection to addr, BootRetryAttempts times.
func dialable(addr string) bool {
	for i := 0; i < BootRetryAttempts; i++ {
		if i > 0 {
			time.Sleep(BootRetryPause) // the bug: the scheduler thread sleeps between tries
		}
		c, err := net.DialTimeout("tcp", addr, BootDialTimeout)
		if err == nil {
			_ = c.Close()
			return true
		}
	}
	return false
}
