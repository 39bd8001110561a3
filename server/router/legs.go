package router

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"pdsoak/server/gen"
	"pdsoak/traceparent"
)

// leg is the outcome of one worker stream.
type leg struct {
	err       error
	transport bool
}

// decodeChunk is one chunk of the decode leg, or (end set) how that leg ended.
type decodeChunk struct {
	c   gen.WorkerChunk
	end *leg
}

// legs are the two worker streams of one attempt.
type legs struct {
	wg          sync.WaitGroup
	prefillDone chan leg         // the prefill leg's end (it forwards nothing)
	chunks      chan decodeChunk // the decode leg's chunks, then its end
}

// sendLegs starts the prefill and the decode leg on ctx; cancel ctx, then wait, to end
// them.
func (r *Router) sendLegs(ctx context.Context, p, d *worker, body []byte, rid string, decodeOnly bool) *legs {
	// chunks is buffered: the decode leg reads on while the relay is busy instead of
	// waiting for it chunk by chunk (order is kept; the leg's end comes last).
	l := newLegs()
	// Both requests are written here, decode's first, before any goroutine starts: the
	// transfer starts with decode's registration, which prefill waits for, so decode's
	// request is on the critical path and should not wait for a goroutine to be
	// scheduled. The goroutines only read the answers.
	dl := r.beginLeg(ctx, d, body, rid)
	var pl pendingLeg
	if !decodeOnly {
		pl = r.beginLeg(ctx, p, body, rid)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		end := r.readLeg(ctx, d, dl, func(c gen.WorkerChunk) error {
			select {
			case l.chunks <- decodeChunk{c: c}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		select {
		case l.chunks <- decodeChunk{end: &end}:
		case <-ctx.Done():
		}
	}()
	if !decodeOnly { // decodeOnly (BugDecodeOnlyWhenPrefillDown): prefillDone never fires
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.prefillDone <- r.readLeg(ctx, p, pl, func(gen.WorkerChunk) error { return nil })
		}()
	}
	return l
}

func (l *legs) wait() { l.wg.Wait() }

// legsPool keeps ended attempts' legs: their two channels (1.2 KB, the chunk channel
// most of it) were the router's largest allocation per request after the SSE buffers.
var legsPool sync.Pool // *legs

func newLegs() *legs {
	if l, ok := legsPool.Get().(*legs); ok {
		return l
	}
	return &legs{prefillDone: make(chan leg, 1), chunks: make(chan decodeChunk, 8)}
}

// recycle puts legs whose goroutines have returned (after wait) back in the pool, their
// channels emptied of what no one read; the caller drops its pointer.
func (l *legs) recycle() {
	for {
		select {
		case <-l.prefillDone:
		case <-l.chunks:
		default:
			legsPool.Put(l)
			return
		}
	}
}

// pendingLeg is a leg whose request went out (lean client) or is still to be sent
// (net/http).
type pendingLeg struct {
	call *legCall
	err  error
	body []byte
	rid  string
	lean bool // through the leg client: call or err is set
}

// beginLeg writes the leg's request when the leg client serves the worker; the answer
// is read by readLeg.
func (r *Router) beginLeg(ctx context.Context, w *worker, body []byte, rid string) pendingLeg {
	if r.legs == nil || !w.lean {
		return pendingLeg{body: body, rid: rid}
	}
	call, err := r.legs.begin(ctx, w.target, body, rid)
	return pendingLeg{call: call, err: err, lean: true}
}

// readLeg reads a leg's answer and feeds each chunk to fn until the done chunk.
// A leg's error wraps a gen sentinel; transport is set when the worker gave no usable
// answer.
func (r *Router) readLeg(ctx context.Context, w *worker, pl pendingLeg, fn func(gen.WorkerChunk) error) leg {
	if !pl.lean {
		return r.runLegHTTP(ctx, w, pl.body, pl.rid, fn)
	}
	var resp *legResponse
	err := pl.err
	if err == nil {
		resp, err = pl.call.response()
	}
	if err != nil {
		return leg{err: LegUnreachable(w.role, w.name, err), transport: true}
	}
	complete := false
	defer func() { resp.finish(complete) }()
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		complete = err == nil
		return leg{err: LegError(w.role, w.name, statusError(resp.StatusCode, b))}
	}
	l, clean := relayLeg(ctx, w, resp.Body, fn, func() {
		// The answer is complete: from here the connection no longer depends on ctx,
		// so cancelling the attempt right after cannot spoil its reuse.
		complete = resp.detach()
	})
	complete = complete && clean
	return l
}

// relayLeg feeds the worker's SSE chunks from body to fn until the done chunk or an
// error chunk (ended is called at either, before fn sees it); clean is false when the
// stream broke before its end.
func relayLeg(ctx context.Context, w *worker, body io.Reader, fn func(gen.WorkerChunk) error, ended func()) (_ leg, clean bool) {
	var final error
	err := readSSE(body, func(c gen.WorkerChunk) (bool, error) {
		if (c.Error != nil || c.Done) && ended != nil {
			ended()
		}
		if c.Error != nil {
			final = LegError(w.role, w.name, c.Error.Err())
			return true, nil
		}
		if err := fn(c); err != nil {
			return true, err
		}
		return c.Done, nil
	})
	if final != nil {
		return leg{err: final}, true
	}
	if err != nil {
		if ctx.Err() != nil {
			return leg{err: LegError(w.role, w.name, context.Cause(ctx))}, false
		}
		return leg{err: LegBroken(w.role, w.name, err), transport: true}, false
	}
	return leg{}, true
}

// runLegHTTP is runLeg through net/http (a WithClient client, or an https worker).
func (r *Router) runLegHTTP(ctx context.Context, w *worker, body []byte, rid string, fn func(gen.WorkerChunk) error) leg {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url+"/generate", bytes.NewReader(body))
	if err != nil {
		return leg{err: fmt.Errorf("router: %s: %w: %w", w.name, gen.ErrInternal, err)}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if rid != "" {
		hreq.Header.Set("X-Request-ID", rid)
	}
	if tp, ok := traceparent.FromContext(ctx); ok {
		hreq.Header.Set(traceparent.Header, tp.String()) // both legs join the client's trace
	}
	resp, err := r.client.Do(hreq)
	if err != nil {
		return leg{err: LegUnreachable(w.role, w.name, err), transport: true}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return leg{err: LegError(w.role, w.name, statusError(resp.StatusCode, b))}
	}
	l, _ := relayLeg(ctx, w, resp.Body, fn, nil)
	return l
}
