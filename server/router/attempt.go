package router

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"pdsoak/server/gen"
)

// result is how one attempt ended.
type result struct {
	ev        gen.Event // the final event on success
	delivered bool      // ev already went to the client
	err       error
	sent      bool    // tokens reached the client
	transport bool    // no usable answer from a worker (refused, reset, truncated)
	failed    *worker // the worker whose leg failed
}

// attempt runs both legs of one request on one pair: build the worker request, send
// it to both workers, then relay decode's chunks to the client until decode finishes
// or a leg fails. When it returns, both legs are gone.
func (r *Router) attempt(ctx context.Context, req *gen.Request, st *reqState, p, d *worker, out chan<- gen.Event, deliver func(gen.Event), log *reqLog) result {
	if p == nil { // FallbackDecodeOnly found no prefill (fallback.go)
		return r.attemptDecodeOnly(ctx, req, st, d, out, deliver, log)
	}
	room := r.room()
	body, err := r.workerRequest(req, room, p, d)
	if err != nil {
		return result{err: err}
	}
	r.setStage(st, "prefill+decode", func(s *reqState) { s.room, s.prefillURL, s.decodeU = &room, p.url, d.url })
	log = log.with("room", room, "prefill", p.name, "decode", d.name)
	log.Info("router: request routed")
	defer r.hold(p, d)()

	// The legs end with the request (its client going away, its deadline) until the
	// final event is delivered; then only the prefill grace bounds them (relay.finish),
	// since the client's handler ends the request's context as soon as it has the answer.
	actx, cancelCause := context.WithCancelCause(context.WithoutCancel(ctx))
	cancel := func() { cancelCause(context.Canceled) }
	unlink := context.AfterFunc(ctx, func() { cancelCause(context.Cause(ctx)) })
	defer unlink()
	defer cancel()
	decodeOnly := DecodeOnly(r.bugs, p.healthy.Load())
	if decodeOnly {
		log.Warn("router: prefill unhealthy; sending the decode leg alone (sglang#31206 reproduced)")
	}
	legs := r.sendLegs(actx, p, d, body, req.ID, decodeOnly)
	defer legs.wait() // after cancel (deferred later, runs first): both legs are gone
	defer cancel()

	rl := &relay{r: r, ctx: ctx, cancel: cancel, unlink: unlink, st: st, p: p, d: d, out: out, deliver: deliver, log: log, legs: legs}
	if r.abortOnUnhealthy {
		rl.pDown, rl.dDown = p.downCh(), d.downCh()
	}
	if decodeOnly {
		rl.pDown = nil // no prefill leg to fail
	}
	return rl.run()
}

// workerRequest encodes the /generate body both workers of the pair receive (p nil: the
// decode-only body, without a bootstrap room).
func (r *Router) workerRequest(req *gen.Request, room uint64, p, d *worker) ([]byte, error) {
	boot := ""
	if p != nil {
		boot = p.bootstrap()
		if a, ok := r.kvLinks[[2]string{p.url, d.url}]; ok {
			boot = a
		}
	}
	wr := gen.WorkerRequest{RID: req.ID, InputIDs: req.Prompt, BootstrapRoom: &room, BootstrapAddr: boot,
		SamplingParams: gen.WorkerSampling{MaxNewTokens: req.MaxTokens, Temperature: req.Sampling.Temperature,
			TopP: req.Sampling.TopP, Seed: req.Sampling.Seed, IgnoreEOS: req.IgnoreEOS}}
	if p == nil {
		decodeOnlyRequest(&wr)
	}
	if !req.Deadline.IsZero() {
		wr.DeadlineUnixMs = req.Deadline.UnixMilli()
	}
	body, err := gen.AppendWorkerRequest(make([]byte, 0, 256+8*len(req.Prompt)), &wr)
	if err != nil {
		return nil, fmt.Errorf("router: encode request: %w", gen.ErrInternal)
	}
	return body, nil
}

// hold counts the request as outstanding on both workers; the returned func releases it.
func (r *Router) hold(p, d *worker) (release func()) {
	p.outstanding.Add(1)
	d.outstanding.Add(1)
	r.metrics.outstanding.WithLabelValues(p.name).Inc()
	r.metrics.outstanding.WithLabelValues(d.name).Inc()
	return func() {
		p.outstanding.Add(-1)
		d.outstanding.Add(-1)
		r.metrics.outstanding.WithLabelValues(p.name).Dec()
		r.metrics.outstanding.WithLabelValues(d.name).Dec()
	}
}

// relay carries one attempt's decode tokens to the client while watching the prefill
// leg and both workers' health.
type relay struct {
	r      *Router
	ctx    context.Context // the request's context (not the legs')
	cancel context.CancelFunc
	st     *reqState
	p, d   *worker
	out    chan<- gen.Event
	log    *reqLog
	// deliver sends the final event; unlink stops the request's end from cancelling
	// the legs.
	deliver func(gen.Event)
	unlink  func() bool
	legs    *legs

	prefillDone  <-chan leg      // nil once the prefill leg ended
	pDown, dDown <-chan struct{} // closed when a worker goes unhealthy; nil: not watched
	sent         bool            // tokens reached the client
	kvArrived    bool            // decode produced output, so the KV transfer is complete
}

// run waits for the first of: the request ending, a worker going unhealthy, the prefill
// leg ending, or a decode chunk; it returns once the attempt is decided.
func (rl *relay) run() result {
	rl.prefillDone = rl.legs.prefillDone
	for {
		select {
		case <-rl.ctx.Done():
			return rl.gone()
		case <-rl.pDown:
			return rl.fail(rl.p, leg{err: UnhealthyError(rl.p.role, rl.p.name), transport: true})
		case <-rl.dDown:
			return rl.fail(rl.d, leg{err: UnhealthyError(rl.d.role, rl.d.name), transport: true})
		case l := <-rl.prefillDone:
			if res, over := rl.prefillEnded(l); over {
				return res
			}
		case c := <-rl.legs.chunks:
			if res, over := rl.decodeChunk(c); over {
				return res
			}
		}
	}
}

// gone is the result when the request's context ended.
func (rl *relay) gone() result {
	return result{err: fmt.Errorf("router: %w", context.Cause(rl.ctx)), sent: rl.sent}
}

// fail ends the attempt on a failed leg of w, marking w down after a transport error.
func (rl *relay) fail(w *worker, l leg) result {
	if l.transport && rl.ctx.Err() == nil {
		rl.r.markDown(w, l.err)
	}
	rl.log.Warn("router: leg failed", "worker", w.name, "err", l.err, "sent", rl.sent)
	return result{err: l.err, sent: rl.sent, transport: l.transport, failed: w}
}

// prefillEnded handles the prefill leg's end: before decode has its KV a failure dooms
// the attempt; after, it no longer matters.
func (rl *relay) prefillEnded(l leg) (result, bool) {
	rl.prefillDone = nil
	rl.pDown = nil // prefill's part is over; its health no longer matters here
	switch PrefillEnded(l.err, rl.kvArrived, rl.r.bugs) {
	case PrefillLeaveDecode:
		// sglang#9726: the router only waits for the decode leg; a failed prefill leg is
		// drained in the background and the decode leg is left to wait for its KV.
		rl.log.Warn("router: prefill leg failed; decode leg left running (sglang#9726 reproduced)", "err", l.err)
	case PrefillFailAttempt:
		rl.cancel() // the decode leg cannot complete without its KV
		return rl.fail(rl.p, l), true
	default:
		if l.err != nil {
			rl.log.Info("router: prefill leg failed after decode had its KV; ignored", "err", l.err)
		}
	}
	return result{}, false
}

// decodeChunk handles one decode chunk: the leg's end, an error, the done chunk, or
// tokens to forward.
func (rl *relay) decodeChunk(c decodeChunk) (result, bool) {
	if c.end != nil {
		if c.end.err == nil {
			c.end.err, c.end.transport = fmt.Errorf("%w: decode stream ended without a done event", gen.ErrInternal), true
		}
		return rl.fail(rl.d, *c.end), true
	}
	if c.c.Error != nil {
		return rl.fail(rl.d, leg{err: c.c.Error.Err()}), true
	}
	ev := gen.Event{Tokens: c.c.TokenIDs, Done: c.c.Done}
	if c.c.Done {
		ev.Finish, ev.PromptTokens, ev.CompletionTokens = c.c.Finish, c.c.PromptTokens, c.c.CompletionTokens
		return rl.finish(ev), true
	}
	if len(ev.Tokens) == 0 {
		return result{}, false
	}
	return rl.forward(ev)
}

// finish ends a successful attempt, letting the prefill leg end on its own (bounded by
// DefaultPrefillGrace) rather than aborting it.
func (rl *relay) finish(ev gen.Event) result {
	if rl.log.enabled(slog.LevelInfo) { // the arguments cost allocations
		rl.log.Info("router: request finished", "finish_reason", ev.Finish, "completion_tokens", ev.CompletionTokens)
	}
	if rl.prefillDone == nil {
		return result{ev: ev}
	}
	// The client has its answer now rather than after the prefill leg's end (one more
	// hop from decode's ACK through prefill). From here the request's context ending is
	// the client leaving satisfied, not a reason to abort the prefill leg.
	rl.unlink()
	rl.deliver(ev)
	t := time.NewTimer(rl.r.prefillGrace)
	select {
	case <-rl.prefillDone:
	case <-t.C:
	}
	t.Stop()
	return result{ev: ev, delivered: true}
}

// forward sends decode tokens to the client.
func (rl *relay) forward(ev gen.Event) (result, bool) {
	rl.kvArrived, rl.pDown = true, nil // a token means decode has its KV
	if !rl.sent {
		rl.r.setStage(rl.st, "streaming", nil)
		rl.r.metrics.ttft.Observe(time.Since(rl.st.start).Seconds())
	}
	select {
	case rl.out <- ev:
		rl.sent = true
		rl.r.setStage(rl.st, "streaming", func(s *reqState) { s.out += len(ev.Tokens) })
		return result{}, false
	case <-rl.ctx.Done():
		return rl.gone(), true
	}
}
