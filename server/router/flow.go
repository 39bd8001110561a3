package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// Flow is one request's way through the router as an event-driven state machine: pick a
// pair, start both legs, relay decode's chunks, watch the prefill leg and both workers'
// health, then retry on another pair or end. It owns every rule of that way (the order
// of the steps, when a failure dooms an attempt, when a worker is marked down, when the
// final event goes out, the stages /debug/requests shows); its IO goes through FlowIO.
// The Router drives it with a goroutine per request and real sockets (attempt.go), the
// simulator (sim) with its event loop and simulated links: one set of rules, two kinds
// of IO.
//
// A Flow is used by one goroutine at a time. Events for a leg that is no longer open
// (a late chunk, a stale attempt's end) are ignored, so a driver may deliver them late.
type Flow struct {
	io  FlowIO
	cfg *FlowConfig
	req *gen.Request
	// rlog is the request's logger, log the current attempt's (with its pair).
	rlog, log *reqLog
	mu        sync.Locker // guards info; nil: no other goroutine reads it
	nw        int         // how many workers the last pick saw

	info    flowInfo
	exclude []bool // workers that failed an attempt (by FlowIO index); nil: none
	number  int    // the current attempt's index
	last    error  // the last attempt's failure
	a       flowAttempt
	// deadline, gone: the request's context ended (its deadline, its client);
	// delivered: the final event went out; over: nothing is left to do.
	deadline, gone, delivered, over bool
}

// FlowConfig is the router-wide configuration every Flow of a router shares.
type FlowConfig struct {
	MaxRetries       int
	AbortOnUnhealthy bool
	// DeadlineGrace is added to a request's deadline before the router gives up on its
	// legs (GiveUpAt); PrefillGrace bounds the wait for the prefill leg's own end once
	// decode finished (FlowIO.Grace).
	DeadlineGrace, PrefillGrace time.Duration
	Bugs                        scheduler.BugSet
	Fallback                    Fallback
	// RoomSalt is mixed into every bootstrap room (Room).
	RoomSalt uint64
	// Log is the base logger (nil: none).
	Log *slog.Logger
}

// FlowIO is what a Flow asks of its driver. Workers are named by index: the prefill
// candidates first, then the decode candidates, as Candidates lists them. No method
// calls back into the Flow; what the IO brings back (leg events, timers, the client
// leaving, a worker going down) the driver hands to the Flow's event methods.
type FlowIO interface {
	// Now is the driver's clock.
	Now() time.Time
	// Candidates describes the workers for a pick (exclude: by index, nil for none).
	Candidates(exclude []bool) (prefill, decode []Candidate)
	// Intn and Uint64 draw from the router's seeded generator.
	Intn(n int) int
	Uint64() uint64
	// Describe says why no pair exists (for the refusal's message).
	Describe() string
	// Worker names worker w: its role ("prefill", "decode") and name.
	Worker(w int) (role, name string)
	// Hold counts an attempt as outstanding on its workers, Release ends that (p -1:
	// no prefill).
	Hold(p, d int)
	Release(p, d int)
	// StartLegs sends an attempt's legs; their chunks and ends come back through
	// Decode, DecodeFailed and PrefillEnded with l.Attempt. An error fails the attempt
	// before anything was sent.
	StartLegs(l Legs) error
	// CancelLegs ends what is left of the current attempt's legs (the workers see their
	// requests end).
	CancelLegs()
	// Forward writes decode tokens to the client; an error (the request's context
	// ended, as context.Cause says) ends the attempt as ContextEnded does.
	Forward(tokens []int) error
	// Final hands the request's final event to the client (once per request). It may
	// come before the last attempt is closed: the request's end then no longer cancels
	// the legs, which PrefillGrace bounds.
	Final(ev gen.Event)
	// Grace starts the prefill grace timer for d, or stops it (d 0); when it fires the
	// driver calls GraceOver.
	Grace(d time.Duration)
	// MarkDown marks worker w unhealthy at once after a transport error
	// (WorkerState.MarkDown); when that changes its health the driver hands WorkerDown(w)
	// to the flows (those watching w fail under abort-on-unhealthy).
	MarkDown(w int, err error)
	// Done says that the flow is over: its last attempt is closed.
	Done()
}

// Legs is what one attempt sends.
type Legs struct {
	Attempt int
	// Prefill and Decode are worker indexes; Prefill is -1 for a decode-only attempt
	// (--pd-fallback decode-only: no bootstrap room, decode computes the prompt).
	Prefill, Decode int
	// Room is the bootstrap room (Prefill >= 0).
	Room uint64
	// SkipPrefill: the decode leg goes alone although a prefill was paired
	// (BugDecodeOnlyWhenPrefillDown, sglang#31206).
	SkipPrefill bool
}

// flowAttempt is the current attempt's state.
type flowAttempt struct {
	live                    bool
	p, d                    int  // workers (p -1: decode-only)
	prefillOpen, decodeOpen bool // the legs that have not ended
	watchP                  bool // the prefill's health still matters
	sent                    bool // tokens reached the client
	kvArrived               bool // decode streamed a token, so it has its KV
	grace                   bool // the prefill grace timer runs
}

// flowInfo is the request as /debug/requests shows it.
type flowInfo struct {
	start, stageSince time.Time
	stage             string
	room              uint64
	hasRoom           bool
	p, d              int // -1: none
	out               int
}

// NewFlow returns the flow of req; call Start to begin it. mu, when not nil, guards
// what Info reads; attrs are the request's log attributes after its id.
func NewFlow(io FlowIO, cfg *FlowConfig, req *gen.Request, mu sync.Locker, attrs ...any) *Flow {
	f := &Flow{}
	f.Init(io, cfg, req, mu, attrs...)
	return f
}

// Init is NewFlow in place (a driver embeds its Flow).
func (f *Flow) Init(io FlowIO, cfg *FlowConfig, req *gen.Request, mu sync.Locker, attrs ...any) {
	now := io.Now()
	base := cfg.Log
	if base == nil {
		base = discardLog
	}
	*f = Flow{io: io, cfg: cfg, req: req, mu: mu, rlog: &reqLog{base: base, attrs: append([]any{"rid", req.ID}, attrs...)},
		info: flowInfo{start: now, stageSince: now, stage: "routing", p: -1, d: -1}}
	f.log = f.rlog
}

var discardLog = slog.New(slog.DiscardHandler)

// Request is the flow's request.
func (f *Flow) Request() *gen.Request { return f.req }

// Over reports whether the flow is done: its last attempt is closed.
func (f *Flow) Over() bool { return f.over }

// Delivered reports whether the final event went out (from then on the request's
// context no longer matters).
func (f *Flow) Delivered() bool { return f.delivered }

// Sent reports whether the current attempt forwarded tokens to the client.
func (f *Flow) Sent() bool { return f.a.sent }

// Attempt is the current attempt's index.
func (f *Flow) Attempt() int { return f.number }

// Open reports which legs of the current attempt are still open.
func (f *Flow) Open() (prefill, decode bool) {
	return f.a.live && f.a.prefillOpen, f.a.live && f.a.decodeOpen
}

// Watching reports whether the current attempt fails when its prefill (p) or decode (d)
// worker goes unhealthy (abort-on-unhealthy), and which workers those are.
func (f *Flow) Watching() (p, d int, watchP, watchD bool) {
	on := f.a.live && !f.delivered && f.cfg.AbortOnUnhealthy
	return f.a.p, f.a.d, on && f.a.watchP, on
}

// GiveUpAt is when the router gives up on the request's legs itself (the request's end
// then comes as ContextEnded with context.DeadlineExceeded): its deadline plus the
// DeadlineGrace, so that the workers report their own timeout first. Zero: no deadline.
func (f *Flow) GiveUpAt() time.Time {
	if f.req.Deadline.IsZero() {
		return time.Time{}
	}
	return f.req.Deadline.Add(f.cfg.DeadlineGrace)
}

// Start runs the first attempt.
func (f *Flow) Start() { f.attempt() }

// attempt picks a route and starts its legs, or ends the request when none is left.
func (f *Flow) attempt() {
	ps, ds := f.io.Candidates(f.exclude)
	route, err := PickRoute(ps, ds, f.cfg.Bugs, f.cfg.Fallback, f.io.Intn, f.io.Describe)
	if err != nil {
		if f.last != nil {
			err = f.last // no other pair to try: the failure itself says most
		}
		f.finish(gen.Event{Done: true, Err: err})
		return
	}
	np := len(ps)
	f.nw = np + len(ds)
	l := Legs{Attempt: f.number, Prefill: -1, Decode: np + route.Decode}
	f.a = flowAttempt{live: true, p: -1, d: l.Decode, decodeOpen: true}
	_, dName := f.io.Worker(l.Decode)
	if route.DecodeOnly {
		f.setStage("decode-only", func(i *flowInfo) { i.hasRoom, i.p, i.d = false, -1, l.Decode })
		f.log = f.rlog.with("decode", dName)
		f.log.Warn("router: no prefill can take the request; serving it decode-only (--pd-fallback decode-only)")
	} else {
		l.Prefill, l.Room = route.Prefill, f.room()
		f.a.p, f.a.prefillOpen, f.a.watchP = l.Prefill, true, true
		f.setStage("prefill+decode", func(i *flowInfo) { i.room, i.hasRoom, i.p, i.d = l.Room, true, l.Prefill, l.Decode })
		_, pName := f.io.Worker(l.Prefill)
		f.log = f.rlog.with("room", l.Room, "prefill", pName, "decode", dName)
		f.log.Info("router: request routed")
		if DecodeOnly(f.cfg.Bugs, ps[route.Prefill].Healthy) {
			f.log.Warn("router: prefill unhealthy; sending the decode leg alone (sglang#31206 reproduced)")
			l.SkipPrefill, f.a.prefillOpen, f.a.watchP = true, false, false
		}
	}
	f.io.Hold(f.a.p, f.a.d)
	if err := f.io.StartLegs(l); err != nil {
		f.fail(-1, err, false)
	}
}

// room draws a bootstrap room.
func (f *Flow) room() uint64 {
	for {
		if v, ok := Room(f.io.Uint64(), f.cfg.RoomSalt); ok {
			return v
		}
	}
}

// live reports whether an event of attempt n still matters.
func (f *Flow) live(n int) bool { return f.a.live && n == f.number }

// Decode handles one chunk of attempt n's decode leg (ev.Err unset: a failure is
// DecodeFailed): tokens to forward, or the done chunk.
func (f *Flow) Decode(n int, ev gen.Event) {
	if !f.live(n) || !f.a.decodeOpen {
		return
	}
	if !ev.Done {
		if len(ev.Tokens) > 0 {
			f.forward(ev.Tokens)
		}
		return
	}
	f.a.decodeOpen = false
	if f.log.enabled(slog.LevelInfo) { // the arguments cost allocations
		f.log.Info("router: request finished", "finish_reason", ev.Finish, "completion_tokens", ev.CompletionTokens)
	}
	if !f.a.prefillOpen {
		f.closeAttempt()
		f.finish(ev)
		return
	}
	// The client has its answer now rather than after the prefill leg's end (one more
	// hop from decode's ACK through prefill); the prefill leg gets PrefillGrace to end
	// on its own rather than being aborted.
	f.delivered = true
	f.io.Final(ev)
	f.a.grace = true
	f.io.Grace(f.cfg.PrefillGrace)
}

// forward sends decode tokens to the client.
func (f *Flow) forward(toks []int) {
	f.a.kvArrived, f.a.watchP = true, false // a token means decode has its KV
	if !f.a.sent {
		f.setStage("streaming", nil)
	}
	if err := f.io.Forward(toks); err != nil {
		f.ContextEnded(err)
		return
	}
	f.a.sent = true
	f.setStage("streaming", func(i *flowInfo) { i.out += len(toks) })
}

// DecodeFailed is attempt n's decode leg ending without its done chunk: err (nil: the
// stream just ended) and transport (the worker gave no usable answer).
func (f *Flow) DecodeFailed(n int, err error, transport bool) {
	if !f.live(n) || !f.a.decodeOpen {
		return
	}
	f.a.decodeOpen = false
	if err == nil {
		err, transport = fmt.Errorf("%w: decode stream ended without a done event", gen.ErrInternal), true
	}
	f.fail(f.a.d, err, transport)
}

// PrefillEnded is attempt n's prefill leg ending (err nil: success): before decode has
// its KV a failure dooms the attempt; after, it no longer matters.
func (f *Flow) PrefillEnded(n int, err error, transport bool) {
	if !f.live(n) || !f.a.prefillOpen {
		return
	}
	f.a.prefillOpen, f.a.watchP = false, false
	if f.delivered {
		f.io.Grace(0)
		f.a.grace = false
		f.closeAttempt()
		f.end()
		return
	}
	switch PrefillEnded(err, f.a.kvArrived, f.cfg.Bugs) {
	case PrefillLeaveDecode:
		// sglang#9726: the router only waits for the decode leg; a failed prefill leg is
		// left, and the decode leg waits for its KV.
		f.log.Warn("router: prefill leg failed; decode leg left running (sglang#9726 reproduced)", "err", err)
	case PrefillFailAttempt:
		f.fail(f.a.p, err, transport) // the decode leg cannot complete without its KV
	default:
		if err != nil {
			f.log.Info("router: prefill leg failed after decode had its KV; ignored", "err", err)
		}
	}
}

// GraceOver is the prefill grace timer firing: the prefill leg is cancelled.
func (f *Flow) GraceOver() {
	if !f.a.live || !f.a.grace {
		return
	}
	f.a.grace = false
	f.closeAttempt()
	f.end()
}

// WorkerDown is worker w going unhealthy: under abort-on-unhealthy the attempt fails if
// it watches w (decode always, prefill until decode has its KV).
func (f *Flow) WorkerDown(w int) {
	p, d, watchP, watchD := f.Watching()
	if (w == p && watchP) || (w == d && watchD) {
		role, name := f.io.Worker(w)
		f.fail(w, UnhealthyError(role, name), true)
	}
}

// ContextEnded is the request's context ending with cause: context.DeadlineExceeded
// (its deadline plus DefaultDeadlineGrace passed) or the client going away. Once the
// final event went out it no longer matters.
func (f *Flow) ContextEnded(cause error) {
	if f.delivered || f.over {
		return
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		f.deadline = true
	} else {
		f.gone = true
	}
	if f.a.live {
		f.fail(-1, fmt.Errorf("router: %w", cause), false)
	}
}

// fail ends the current attempt on a failure of worker w (-1: none), marking w down
// after a transport error, then retries on another pair or ends the request.
func (f *Flow) fail(w int, err error, transport bool) {
	sent := f.a.sent
	if w >= 0 {
		_, name := f.io.Worker(w)
		f.log.Warn("router: leg failed", "worker", name, "err", err, "sent", sent)
	}
	f.closeAttempt() // the attempt is decided before the worker is marked down
	if transport && w >= 0 && !f.deadline && !f.gone {
		f.io.MarkDown(w, err)
	}
	f.last = err
	final, retry := AfterAttempt(Attempt{Err: err, Sent: sent, Transport: transport, Number: f.number,
		MaxRetries: f.cfg.MaxRetries, DeadlinePassed: f.deadline, ClientGone: f.gone})
	if !retry {
		f.finish(gen.Event{Done: true, Err: final})
		return
	}
	if w >= 0 {
		if f.exclude == nil {
			f.exclude = make([]bool, f.nw)
		}
		f.exclude[w] = true // try the other workers of that role
	}
	f.number++
	f.rlog.Warn("router: retrying on another pair", "attempt", f.number, "err", err)
	f.attempt()
}

// closeAttempt cancels what is left of both legs and releases the pair.
func (f *Flow) closeAttempt() {
	if !f.a.live {
		return
	}
	f.a.live = false
	if f.a.grace {
		f.a.grace = false
		f.io.Grace(0)
	}
	f.io.CancelLegs()
	f.io.Release(f.a.p, f.a.d)
}

// finish ends the request with ev, its last attempt already closed.
func (f *Flow) finish(ev gen.Event) {
	f.end()
	f.delivered = true
	f.io.Final(ev)
}

func (f *Flow) end() {
	if !f.over {
		f.over = true
		f.io.Done()
	}
}

// setStage moves the request to stage (its age restarts when it changes) and applies
// set to its info, under the flow's lock.
func (f *Flow) setStage(stage string, set func(*flowInfo)) {
	if f.mu != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
	}
	if f.info.stage != stage {
		f.info.stage, f.info.stageSince = stage, f.io.Now()
	}
	if set != nil {
		set(&f.info)
	}
}

// Info is the request as /debug/requests shows it at now, label naming worker w; call
// it under the flow's lock.
func (f *Flow) Info(now time.Time, label func(w int) string) gen.RequestInfo {
	i := &f.info
	ri := gen.RequestInfo{ID: f.req.ID, Stage: i.stage, AgeSeconds: now.Sub(i.start).Seconds(),
		StageAgeSeconds: now.Sub(i.stageSince).Seconds(), PromptTokens: len(f.req.Prompt), OutputTokens: i.out}
	if i.hasRoom {
		room := i.room
		ri.Room = &room
	}
	if i.p >= 0 {
		ri.Prefill = label(i.p)
	}
	if i.d >= 0 {
		ri.Decode = label(i.d)
	}
	return ri
}

// SortRequests orders /debug/requests entries oldest first.
func SortRequests(out []gen.RequestInfo) {
	slices.SortStableFunc(out, func(a, b gen.RequestInfo) int {
		switch {
		case a.AgeSeconds > b.AgeSeconds:
			return -1
		case a.AgeSeconds < b.AgeSeconds:
			return 1
		}
		return 0
	})
}
