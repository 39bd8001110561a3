package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"pdsoak/server/gen"
)

// Usage is the token accounting of a response.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// CompletionResponse is a /v1/completions response or stream chunk.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is one choice of a CompletionResponse.
type CompletionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// ChatResponse is a /v1/chat/completions response or stream chunk.
type ChatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// ChatChoice is one choice: Message in a response, Delta in a stream chunk.
type ChatChoice struct {
	Index        int          `json:"index"`
	Message      *ChatContent `json:"message,omitempty"`
	Delta        *ChatDelta   `json:"delta,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

// ChatContent is a complete assistant message.
type ChatContent struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatDelta is the part of a message one stream chunk adds.
type ChatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

func (h *Handler) serveCompletions(w http.ResponseWriter, r *http.Request) {
	h.serveOpenAI(w, r, h.parseCompletion)
}

func (h *Handler) serveChat(w http.ResponseWriter, r *http.Request) {
	h.serveOpenAI(w, r, h.parseChat)
}

func (h *Handler) serveOpenAI(w http.ResponseWriter, r *http.Request, parse func([]byte) (*job, *apiError)) {
	rid := ridOf(r)
	log := traceLog(h.log.With("rid", rid, "path", r.URL.Path), r)
	body, e := h.readBody(w, r)
	if e == nil {
		var j *job
		if j, e = parse(body); e == nil {
			j.req.ID = rid
			h.StampDeadline(&j.req, time.Now())
			h.runOpenAI(w, r, j, log)
			return
		}
	}
	log.Info("request rejected", "status", e.status, "kind", e.kind, "param", e.param, "err", e.msg)
	writeError(w, e)
}

// admit runs the common start of a generation: it refuses while draining, derives the
// request context (cancelled by the client going away or by Abort) and calls Generate.
// On success the caller must call done (idempotent: it cancels the context) and then
// h.inFlight.Add(-1) when the request is over.
func (h *Handler) admit(r *http.Request, req *gen.Request, log *slog.Logger) (context.Context, func(), <-chan gen.Event, *apiError) {
	if h.draining.Load() {
		return nil, nil, nil, fromGen(fmt.Errorf("api: server is shutting down: %w", gen.ErrUnavailable))
	}
	h.inFlight.Add(1)
	ctx, cancel := context.WithCancel(r.Context())
	stopAfter := context.AfterFunc(h.abortCtx, cancel)
	done := sync.OnceFunc(func() { stopAfter(); cancel() })
	ch, err := h.gen.Generate(ctx, req)
	if err != nil {
		done()
		h.inFlight.Add(-1)
		return nil, nil, nil, h.explain(r, err)
	}
	if log.Enabled(context.Background(), slog.LevelInfo) { // the arguments cost allocations
		log.Info("request received", "prompt_tokens", len(req.Prompt), "max_tokens", req.MaxTokens,
			"temperature", req.Sampling.Temperature, "bootstrap", req.Bootstrap != nil)
	}
	return ctx, done, ch, nil
}

// genStream is one admitted generation with the writer state its response needs.
type genStream struct {
	ctx   context.Context
	ch    <-chan gen.Event
	rc    *http.ResponseController
	guard *writeGuard
	// cancel aborts the generation (idempotent); close also clears the write guard and
	// leaves the in-flight count.
	cancel, close func()
}

// open admits req for both the OpenAI and the worker endpoints; on a refusal it writes
// the error response itself and returns nil.
func (h *Handler) open(w http.ResponseWriter, r *http.Request, req *gen.Request, log *slog.Logger) *genStream {
	ctx, done, ch, e := h.admit(r, req, log)
	if e != nil {
		h.logRefusal(log, req, e)
		writeError(w, e)
		return nil
	}
	rc := http.NewResponseController(w)
	guard := &writeGuard{rc: rc, stall: h.writeStall}
	return &genStream{ctx: ctx, ch: ch, rc: rc, guard: guard, cancel: done, close: func() {
		guard.clear()
		done()
		h.inFlight.Add(-1)
	}}
}

// logRefusal writes the one line of a refused request. Overload refusals come in floods,
// one per request, exactly when the server is busiest: past the refusal log rate they are
// counted, and the next line written says how many were left out.
func (h *Handler) logRefusal(log *slog.Logger, req *gen.Request, e *apiError) {
	if e.kind == gen.ErrorKind(gen.ErrOverloaded) && !h.refusalLog.Allow() {
		h.refusalsLeftOut.Add(1)
		return
	}
	attrs := []any{"status", e.status, "kind", e.kind, "prompt_tokens", len(req.Prompt), "max_tokens", req.MaxTokens, "err", e.msg}
	if n := h.refusalsLeftOut.Swap(0); n > 0 {
		attrs = append(attrs, "overload_refusals_not_logged", n)
	}
	log.Info("request refused", attrs...)
}

// explain turns a generator error into the client's error; an abort caused by shutdown
// becomes "unavailable".
func (h *Handler) explain(r *http.Request, err error) *apiError {
	if errors.Is(err, gen.ErrAborted) && h.abortCtx.Err() != nil && r.Context().Err() == nil {
		err = fmt.Errorf("api: server shut down before the request finished: %w", gen.ErrUnavailable)
	}
	return fromGen(err)
}

// recv returns the generator's next event. After ctx is cancelled the generator has
// abortGrace to send its final event; if it does not, recv gives up with ErrInternal and
// drains the channel in the background. A channel closed without a Done event is an
// internal error too.
func (h *Handler) recv(ctx context.Context, ch <-chan gen.Event) gen.Event {
	var ev gen.Event
	var ok bool
	select {
	case ev, ok = <-ch:
	case <-ctx.Done():
		t := time.NewTimer(h.abortGrace)
		select {
		case ev, ok = <-ch:
			t.Stop()
		case <-t.C:
			go func() {
				for range ch {
				}
			}()
			return gen.Event{Done: true, Err: fmt.Errorf("api: generator did not end the request within %s of its cancellation: %w", h.abortGrace, gen.ErrInternal)}
		}
	}
	if !ok {
		return gen.Event{Done: true, Err: fmt.Errorf("api: generator closed the stream without a final event: %w", gen.ErrInternal)}
	}
	return ev
}

// drain consumes events until the final one (after a cancel).
func (h *Handler) drain(ctx context.Context, ch <-chan gen.Event) {
	for !h.recv(ctx, ch).Done {
	}
}

func (h *Handler) runOpenAI(w http.ResponseWriter, r *http.Request, j *job, log *slog.Logger) {
	start := time.Now()
	gs := h.open(w, r, &j.req, log)
	if gs == nil {
		return
	}
	defer gs.close()
	ctx, ch, rc, guard := gs.ctx, gs.ch, gs.rc, gs.guard
	out := &openaiOut{w: w, rc: rc, guard: guard}
	ans := &out.ans
	ans.reset(Chunks{ID: ID(j.chat, j.req.ID), Model: h.model, Created: time.Now().Unix(), Chat: j.chat},
		&j.req, j.chat, j.stream, j.includeUsage, j.stop, h.tok.NewStreamDecoder())
	firstSeen := false
	var ev gen.Event
	var stopped bool
	for {
		ev = h.recv(ctx, ch)
		if ev.Err != nil {
			if r.Context().Err() != nil {
				log.Info("client disconnected", "completion_tokens", ans.Count(), "elapsed", time.Since(start))
				return
			}
			e := h.explain(r, ev.Err)
			if ans.Started() {
				log.Warn("request failed mid-stream", "kind", e.kind, "stage", e.stage, "completion_tokens", ans.Count(), "err", ev.Err)
				out.streamError(e)
			} else {
				log.Warn("request failed", "status", e.status, "kind", e.kind, "stage", e.stage, "err", ev.Err)
				writeError(w, e)
			}
			return
		}
		if !firstSeen && len(ev.Tokens) > 0 {
			firstSeen = true
			if log.Enabled(context.Background(), slog.LevelInfo) { // the arguments cost allocations
				log.Info("first token", "ttft", time.Since(start))
			}
		}
		var o Out
		o, stopped = ans.Event(ev)
		out.write(o)
		if out.err != nil {
			log.Info("client disconnected", "completion_tokens", ans.Count(), "err", out.err)
			gs.cancel() // cancels the generation before waiting for its end
			h.drain(ctx, ch)
			return
		}
		if stopped {
			log.Info("stop string matched", "completion_tokens", ans.Count())
			gs.cancel()
			h.drain(ctx, ch)
			break
		}
		if ev.Done {
			break
		}
	}
	o, finish, usage := ans.Finish(ev, stopped)
	out.write(o)
	if log.Enabled(context.Background(), slog.LevelInfo) { // the arguments cost allocations
		log.Info("request finished", "finish_reason", finish, "prompt_tokens", usage.PromptTokens,
			"completion_tokens", usage.CompletionTokens, "elapsed", time.Since(start), "write_err", out.err)
	}
}

// openaiOut writes a completion or chat response, streamed or whole, for its Answer.
type openaiOut struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	guard *writeGuard
	ans   Answer
	err   error // the first write error (the client went away)
}

func (o *openaiOut) send(v any) {
	if o.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		o.err = fmt.Errorf("api: encoding a chunk: %w", err)
		return
	}
	o.raw(append(append([]byte("data: "), b...), '\n', '\n'))
}

func (o *openaiOut) raw(b []byte) {
	if o.err != nil {
		return
	}
	o.guard.arm()
	if _, err := o.w.Write(b); err != nil {
		o.err = err
		return
	}
	if err := o.rc.Flush(); err != nil {
		o.err = err
	}
}

// write writes what the Answer decided (Out) on the response.
func (o *openaiOut) write(x Out) {
	if x.Begin {
		o.begin(x.Role)
	}
	for _, v := range x.Data {
		if v != nil {
			o.send(v)
		}
	}
	if x.Done {
		o.done()
	}
	if x.Whole != nil {
		o.whole(x.Whole)
	}
}

// begin sends the stream headers (and the chat role chunk) once the generation runs.
func (o *openaiOut) begin(role any) {
	o.guard.arm()
	hd := o.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	if role != nil {
		o.send(role)
	} else if err := o.rc.Flush(); err != nil {
		o.err = err
	}
}

// done is data: [DONE]; it is left to the server's own flush after the handler returns
// where the write guard allows (still bounded by the write deadline).
func (o *openaiOut) done() {
	if o.err == nil && o.guard.keepForFinalFlush() {
		if _, err := o.w.Write([]byte("data: [DONE]\n\n")); err != nil {
			o.err = err
		}
		return
	}
	o.raw([]byte("data: [DONE]\n\n"))
}

// whole is a whole answer's body; the guard is armed before it is written, and kept
// for the server's flush of it.
func (o *openaiOut) whole(v any) {
	if !o.guard.keepForFinalFlush() {
		o.guard.arm()
	}
	o.w.Header().Set("Content-Type", "application/json")
	writeJSON(o.w, http.StatusOK, v)
}

// streamError ends a started stream with an error event and no [DONE], so the client
// sees a failure rather than a truncated success.
func (o *openaiOut) streamError(e *apiError) {
	o.send(e.body())
}
