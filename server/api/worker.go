package api

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

// parseWorker parses and validates a POST /generate body (gen.WorkerRequest).
func (h *Handler) parseWorker(body []byte) (*gen.Request, *apiError) {
	// The router's compact encoding takes the fast path; anything else, and every
	// error, is encoding/json's.
	wr, fast := gen.FastWorkerRequest(body)
	if !fast {
		wr = gen.WorkerRequest{} // what the fast path read before it declined goes
		if err := decode(body, &wr); err != nil {
			return nil, err
		}
	}
	if len(wr.InputIDs) == 0 {
		return nil, invalid("input_ids", "input_ids must not be empty")
	}
	if err := h.checkIDs("input_ids", wr.InputIDs); err != nil {
		return nil, err
	}
	sp := wr.SamplingParams
	if sp.MaxNewTokens <= 0 {
		return nil, invalid("sampling_params.max_new_tokens", fmt.Sprintf("max_new_tokens must be at least 1 (got %d)", sp.MaxNewTokens))
	}
	limit := h.contextLen
	if limit <= 0 {
		limit = AbsurdMaxTokens
	}
	if sp.MaxNewTokens > limit {
		return nil, invalid("sampling_params.max_new_tokens", fmt.Sprintf("max_new_tokens is %d; the context length is %d", sp.MaxNewTokens, limit))
	}
	if len(wr.InputIDs)+sp.MaxNewTokens > limit {
		return nil, tooLong("input_ids", fmt.Sprintf("input_ids (%d tokens) plus max_new_tokens (%d) exceeds the context length %d",
			len(wr.InputIDs), sp.MaxNewTokens, limit))
	}
	if math.IsNaN(sp.Temperature) || sp.Temperature < 0 || sp.Temperature > 2 {
		return nil, invalid("sampling_params.temperature", fmt.Sprintf("temperature must be in [0, 2] (got %v)", sp.Temperature))
	}
	if math.IsNaN(sp.TopP) || sp.TopP < 0 || sp.TopP > 1 {
		return nil, invalid("sampling_params.top_p", fmt.Sprintf("top_p must be in [0, 1] (got %v)", sp.TopP))
	}
	req := &gen.Request{
		ID:         wr.RID,
		Prompt:     wr.InputIDs,
		MaxTokens:  sp.MaxNewTokens,
		Sampling:   kernels.Sampling{Temperature: sp.Temperature, TopP: sp.TopP, Seed: sp.Seed},
		IgnoreEOS:  sp.IgnoreEOS,
		DecodeOnly: wr.DecodeOnly,
	}
	switch {
	case wr.BootstrapRoom != nil:
		req.Bootstrap = &gen.Bootstrap{Room: *wr.BootstrapRoom, Addr: wr.BootstrapAddr}
	case wr.BootstrapAddr != "":
		return nil, invalid("bootstrap_room", "bootstrap_addr is set without bootstrap_room")
	}
	if wr.DecodeOnly && wr.BootstrapRoom != nil {
		return nil, invalid("decode_only", "decode_only is a request without a bootstrap room; bootstrap_room is set")
	}
	if wr.DeadlineUnixMs < 0 {
		return nil, invalid("deadline_unix_ms", "deadline_unix_ms must not be negative")
	}
	if wr.DeadlineUnixMs > 0 {
		req.Deadline = time.UnixMilli(wr.DeadlineUnixMs)
	}
	return req, nil
}

// serveGenerate is POST /generate, the worker endpoint the PD router calls. The answer
// is an SSE stream of gen.WorkerChunk ("data: {json}\n\n"); the last chunk has done=true
// and carries the finish reason or the error. A refusal, or a failure before the first
// event, is an error status with the ErrorResponse body (error.type = gen.ErrorKind).
func (h *Handler) serveGenerate(w http.ResponseWriter, r *http.Request) {
	rid := ridOf(r)
	log := traceLog(h.log.With("rid", rid, "path", r.URL.Path), r)
	body, e := h.readBody(w, r)
	var req *gen.Request
	if e == nil {
		req, e = h.parseWorker(body)
	}
	if e != nil {
		log.Info("request rejected", "status", e.status, "kind", e.kind, "param", e.param, "err", e.msg)
		writeError(w, e)
		return
	}
	if req.ID == "" {
		req.ID = rid
	} else if req.ID != rid {
		if requestID(req.ID) == req.ID {
			w.Header().Set("X-Request-ID", req.ID)
		}
		log = traceLog(h.log.With("rid", req.ID, "path", r.URL.Path), r)
	}
	h.StampDeadline(req, time.Now())
	if req.Bootstrap != nil {
		log = log.With("room", req.Bootstrap.Room)
	}
	h.runWorker(w, r, req, log)
}

func (h *Handler) runWorker(w http.ResponseWriter, r *http.Request, req *gen.Request, log *slog.Logger) {
	start := time.Now()
	gs := h.open(w, r, req, log)
	if gs == nil {
		return
	}
	defer gs.close()
	ctx, ch, rc, guard := gs.ctx, gs.ch, gs.rc, gs.guard
	started, count := false, 0
	var werr error
	var buf []byte // one event's bytes, reused
	unflushed := false
	frame := func(c gen.WorkerChunk) ([]byte, error) {
		buf = append(buf[:0], "data: "...)
		var err error
		if buf, err = gen.AppendWorkerChunk(buf, &c); err != nil {
			return nil, err
		}
		return append(buf, '\n', '\n'), nil
	}
	// send writes one chunk; it flushes unless more events are already waiting, so a
	// reader that fell behind gets them in one write (no event waits for a later one:
	// the last of those in hand is always flushed).
	send := func(c gen.WorkerChunk, more bool) {
		if werr != nil {
			return
		}
		b, err := frame(c)
		if err != nil {
			werr = err
			return
		}
		if !unflushed {
			guard.arm() // once per flushed batch: the batch's writes are bounded together
		}
		if _, werr = w.Write(b); werr != nil {
			return
		}
		if unflushed = more; !more {
			werr = rc.Flush()
		}
	}
	// sendLast writes the done chunk; it leaves the flush to the server's own after the
	// handler returns when that flush stays bounded by the write deadline.
	sendLast := func(c gen.WorkerChunk) {
		if werr == nil && guard.keepForFinalFlush() {
			unflushed = true
			b, err := frame(c)
			if err != nil {
				werr = err
				return
			}
			_, werr = w.Write(b)
			return
		}
		send(c, false)
	}
	for {
		ev := h.recv(ctx, ch)
		if ev.Err != nil && r.Context().Err() != nil {
			log.Info("client disconnected", "completion_tokens", count, "elapsed", time.Since(start))
			return
		}
		if ev.Err != nil && !started {
			e := h.explain(r, ev.Err)
			log.Warn("request failed", "status", e.status, "kind", e.kind, "stage", e.stage, "err", ev.Err)
			writeError(w, e)
			return
		}
		if !started {
			started = true
			guard.arm()
			hd := w.Header()
			hd.Set("Content-Type", "text/event-stream")
			hd.Set("Cache-Control", "no-cache")
			hd.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			if len(ev.Tokens) > 0 {
				if log.Enabled(context.Background(), slog.LevelInfo) { // the arguments cost allocations
					log.Info("first token", "ttft", time.Since(start))
				}
			}
		}
		count += len(ev.Tokens)
		c := gen.WorkerChunk{TokenIDs: ev.Tokens, Done: ev.Done}
		if ev.Done {
			c.Finish, c.PromptTokens, c.CompletionTokens = ev.Finish, ev.PromptTokens, ev.CompletionTokens
			if ev.Err != nil {
				c.Finish = ""
				e := h.explain(r, ev.Err)
				c.Error = &gen.WorkerError{Kind: e.kind, Stage: e.stage, Message: e.msg, RetryAfterSeconds: float64(e.retryAfter)}
				log.Warn("request failed mid-stream", "kind", e.kind, "stage", e.stage, "completion_tokens", count, "err", ev.Err)
			}
		}
		if ev.Done {
			sendLast(c)
		} else {
			send(c, len(ch) > 0)
		}
		if werr != nil {
			log.Info("client disconnected", "completion_tokens", count, "err", werr)
			gs.cancel()
			if !ev.Done {
				h.drain(ctx, ch)
			}
			return
		}
		if ev.Done {
			if ev.Err == nil {
				if log.Enabled(context.Background(), slog.LevelInfo) { // the arguments cost allocations
					log.Info("request finished", "finish_reason", ev.Finish, "completion_tokens", count, "elapsed", time.Since(start))
				}
			}
			return
		}
	}
}
