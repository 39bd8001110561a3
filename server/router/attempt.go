package router

import (
	"context"
	"fmt"
	"time"

	"pdsoak/server/gen"
)

// flowDriver runs one request's Flow (flow.go) on its own goroutine with real sockets:
// it is the Flow's FlowIO, and its loop hands the Flow each event as it comes (the
// request's context ending, a worker going unhealthy, the prefill leg's end, a decode
// chunk, the prefill grace timer) until the flow is over. The legs run on the goroutines
// of legs.go; a Flow call that cancels them waits for them, so when it returns both
// legs are gone.
type flowDriver struct {
	*Pool // Candidates, Intn, Uint64, Describe, Worker, Hold, Release
	f     Flow
	r     *Router
	ctx   context.Context // the request's, bounded by its deadline plus the grace
	out   chan gen.Event
	key   uint64
	start time.Time

	// The current attempt's legs: cancel ends them, unlink stops the request's end
	// from cancelling them, pDown and dDown close when a worker goes unhealthy.
	legs         *legs
	cancel       func()
	unlink       func() bool
	pDown, dDown <-chan struct{}
	grace        *time.Timer
}

// run is the request's goroutine: the first attempt, then every event until the flow
// is over.
func (d *flowDriver) run() {
	defer close(d.out)
	if t := d.f.GiveUpAt(); !t.IsZero() {
		var cancel context.CancelFunc
		d.ctx, cancel = context.WithDeadline(d.ctx, t)
		defer cancel()
	}
	d.f.Start()
	for !d.f.Over() {
		d.step()
	}
}

// step waits for the next event and hands it to the flow.
func (d *flowDriver) step() {
	var ctxDone <-chan struct{}
	if !d.f.Delivered() {
		ctxDone = d.ctx.Done()
	}
	var prefillDone <-chan leg
	var chunks <-chan decodeChunk
	if po, do := d.f.Open(); d.legs != nil {
		if po {
			prefillDone = d.legs.prefillDone
		}
		if do {
			chunks = d.legs.chunks
		}
	}
	p, dw, watchP, watchD := d.f.Watching()
	var pDown, dDown <-chan struct{}
	if watchP {
		pDown = d.pDown
	}
	if watchD {
		dDown = d.dDown
	}
	var graceC <-chan time.Time
	if d.grace != nil {
		graceC = d.grace.C
	}
	n := d.f.Attempt()
	select {
	case <-ctxDone:
		d.f.ContextEnded(context.Cause(d.ctx))
	case <-pDown:
		d.f.WorkerDown(p)
	case <-dDown:
		d.f.WorkerDown(dw)
	case l := <-prefillDone:
		if l.err == nil || !d.ended() {
			d.f.PrefillEnded(n, l.err, l.transport)
		}
	case c := <-chunks:
		switch {
		case c.end != nil:
			if !d.ended() {
				d.f.DecodeFailed(n, c.end.err, c.end.transport)
			}
		case c.c.Error != nil:
			if !d.ended() {
				d.f.DecodeFailed(n, c.c.Error.Err(), false)
			}
		default:
			d.f.Decode(n, gen.Event{Tokens: c.c.TokenIDs, Done: c.c.Done, Finish: c.c.Finish,
				PromptTokens: c.c.PromptTokens, CompletionTokens: c.c.CompletionTokens})
		}
	case <-graceC:
		d.grace = nil
		d.f.GraceOver()
	}
}

// ended hands the flow the request's context's end when a leg failure may come from it
// (the legs end with the request), so the failure is judged as the request's end.
func (d *flowDriver) ended() bool {
	if d.f.Delivered() || d.ctx.Err() == nil {
		return false
	}
	d.f.ContextEnded(context.Cause(d.ctx))
	return true
}

// The FlowIO of the real router.

func (d *flowDriver) Now() time.Time { return time.Now() }

// StartLegs encodes the worker request and sends both legs (legs.go) on a context of
// their own, which the request's end cancels until the final event went out.
func (d *flowDriver) StartLegs(l Legs) error {
	r := d.r
	var p *worker
	if l.Prefill >= 0 {
		p = r.worker(l.Prefill)
	}
	dw := r.worker(l.Decode)
	req := d.f.Request()
	body, err := r.workerRequest(req, l.Room, p, dw)
	if err != nil {
		return err
	}
	if l.Attempt > 0 {
		r.metrics.retries.Inc()
	}
	if p == nil {
		r.metrics.decodeOnly.Inc()
	}
	actx, cancelCause := context.WithCancelCause(context.WithoutCancel(d.ctx))
	ctx := d.ctx
	d.cancel = func() { cancelCause(context.Canceled) }
	d.unlink = context.AfterFunc(ctx, func() { cancelCause(context.Cause(ctx)) })
	d.legs = r.sendLegs(actx, p, dw, body, req.ID, p == nil || l.SkipPrefill)
	d.pDown, d.dDown = nil, nil
	if r.abortOnUnhealthy {
		if p != nil {
			d.pDown = p.downCh()
		}
		d.dDown = dw.downCh()
	}
	return nil
}

func (d *flowDriver) CancelLegs() {
	if d.legs == nil {
		return
	}
	d.cancel()
	d.legs.wait()
	d.legs.recycle() // both goroutines returned and step reads d.legs afresh: no one holds it
	d.unlink()
	d.legs, d.cancel, d.unlink, d.pDown, d.dDown = nil, nil, nil, nil, nil
}

func (d *flowDriver) Forward(toks []int) error {
	if !d.f.Sent() {
		d.r.metrics.ttft.Observe(time.Since(d.start).Seconds())
	}
	select {
	case d.out <- gen.Event{Tokens: toks}:
		return nil
	case <-d.ctx.Done():
		return context.Cause(d.ctx)
	}
}

func (d *flowDriver) Final(ev gen.Event) {
	if d.unlink != nil {
		d.unlink() // the client's handler ends the request's context once it has the answer
	}
	d.r.deliver(d.out, ev, d.f.Request().ID, d.start)
}

func (d *flowDriver) Grace(t time.Duration) {
	if d.grace != nil {
		d.grace.Stop()
		d.grace = nil
	}
	if t > 0 {
		d.grace = time.NewTimer(t)
	}
}

func (d *flowDriver) MarkDown(w int, err error) { d.r.markDown(w, err) }

func (d *flowDriver) Done() {
	d.r.reqMu.Lock()
	delete(d.r.reqs, d.key)
	d.r.reqMu.Unlock()
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
