package harness

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/chaos"
	"pdsoak/harness/client"
	"pdsoak/harness/judge"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
)

// executor is the workloads' Sender: it runs each request through the client and
// records its whole life in the ledger — scheduled, sent, headers, first token and
// exactly one done event with the outcome.
type executor struct {
	c      *client.Client
	led    *ledger.Writer
	log    *slog.Logger
	probe  *debugProbe
	lag    *judge.LagRecorder
	reqCtx context.Context
	// seed derives each request's traceparent (see stampTrace).
	seed int64

	inflight atomic.Int64
	// noLag names workloads whose send lag is throttled on purpose (max_in_flight)
	// and so says nothing about the harness.
	noLag map[string]bool

	dmu        sync.RWMutex
	disconnect chaos.DisconnectRules // guarded by dmu

	counts [16]atomic.Int64 // indexed by outcomeIndex
	// completed counts the requests that ended other than by a silent drop: the wedge
	// detector's progress (a request the harness gave up on is not progress).
	completed atomic.Int64
	// onSilentDrop, when set, is called (before the done event) for every silent drop.
	onSilentDrop func(id string)
	// faults gives each non-ok request its cause; live and interrupted let the
	// interrupt record what was in flight (see explain.go).
	faults      *faultLog
	live        liveReqs
	interrupted atomic.Bool
	// causeless leaves causes to reports: a shard that applies no faults cannot tell
	// what explains an error (the merged ledger, with shard 1's faults, can).
	causeless bool
}

var outcomeIndex = func() map[ledger.Outcome]int {
	m := map[ledger.Outcome]int{}
	for i, o := range ledger.Outcomes {
		m[o] = i
	}
	return m
}()

// Send implements workload.Sender. It always returns a result and always writes one
// done event for the request. The request is bounded by its deadlines and by the
// runner's request context, not by the workload's ctx.
func (e *executor) Send(_ context.Context, r *workload.Req) *client.Result {
	return e.send(e.reqCtx, r)
}

// SendCtx is Send for requests that must also end when ctx ends (fault bursts that
// are stopped): they are cancelled then.
func (e *executor) SendCtx(ctx context.Context, r *workload.Req) *client.Result {
	rctx, cancel := context.WithCancel(e.reqCtx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	return e.send(rctx, r)
}

func (e *executor) send(reqCtx context.Context, r *workload.Req) *client.Result {
	e.inflight.Add(1)
	defer e.inflight.Add(-1)
	if r.Scheduled.IsZero() {
		r.Scheduled = time.Now()
	}
	stampTrace(e.seed, r)
	tally := r.Tally(e.cancelAfter(r))
	tid := traceID(r) // once: both events carry it
	e.emitScheduled(r, tid)
	obs := &reqObserver{e: e, r: r, tally: tally}
	e.live.track(&obs.live, &r.Request)
	defer e.live.end(&obs.live)
	res := e.c.Do(reqCtx, &r.Request, obs)
	if e.interrupted.Load() {
		judge.ReclassifyAtInterrupt(&r.Request, res)
	}
	tally.Done(res)
	e.emitDone(r, res, obs, tid)
	return res
}

// emitScheduled and emitDone build the request's ledger events in frames of their own:
// a ledger.Event is large, and in send's frame it would sit on every held stream's
// goroutine stack for the request's whole life (issue 11: the stack doubled to 16 KiB).
//
//go:noinline
func (e *executor) emitScheduled(r *workload.Req, tid string) {
	e.led.Emit(workload.ScheduledEvent(r, tid))
}

//go:noinline
func (e *executor) emitDone(r *workload.Req, res *client.Result, obs *reqObserver, tid string) {
	ev := workload.DoneEvent(r, res, tid)
	if res.Outcome != ledger.OutcomeOK && !e.causeless {
		ev.Cause = e.faults.cause(res.Outcome, r.Scheduled, res.End)
	}
	if !res.Outcome.SilentDrop() {
		e.completed.Add(1)
	}
	if res.Outcome.SilentDrop() {
		if e.onSilentDrop != nil {
			e.onSilentDrop(r.ID)
		}
		if d := obs.debug.Load(); d != nil {
			ev.ServerDebug = *d
		}
		e.log.Warn("silent drop", "request_id", r.ID, "trace_id", ev.TraceID, "outcome", res.Outcome, "phase", res.Phase,
			"deadline", res.Deadline, "age", res.Age(), "server", string(ev.ServerDebug))
	} else if e.debugOn() {
		e.log.Debug("done", "request_id", r.ID, "outcome", res.Outcome, "status", res.Status, "e2e", res.E2E(), "err", res.Err)
	}
	if i, ok := outcomeIndex[res.Outcome]; ok {
		e.counts[i].Add(1)
	}
	e.led.Emit(ev)
}

// cancelAfter applies a client-disconnect fault (chaos.DisconnectRules).
func (e *executor) cancelAfter(r *workload.Req) (int, *chaos.LiveStats) {
	e.dmu.RLock()
	defer e.dmu.RUnlock()
	return e.disconnect.CancelAfter(r.Workload, r.ID, r.Stream)
}

// SetDisconnect installs (afterTokens > 0) or removes a client-disconnect rule for a
// workload ("client": every workload); stats, when set, counts the requests it hit.
func (e *executor) SetDisconnect(target string, afterTokens int, fraction float64, stats *chaos.LiveStats) {
	e.dmu.Lock()
	defer e.dmu.Unlock()
	e.disconnect.Set(target, afterTokens, fraction, stats)
}

// reqObserver turns client progress into ledger events for one request.
type reqObserver struct {
	e     *executor
	r     *workload.Req
	live  liveReq // in e.live while the request is in flight
	tally *workload.Tally
	debug atomic.Pointer[json.RawMessage]
}

func (o *reqObserver) Sent(req *client.Request, at time.Time) {
	o.live.sent.Store(at.UnixNano())
	o.tally.Began()
	lag := at.Sub(req.Scheduled)
	if !o.e.noLag[o.r.Workload] {
		o.e.lag.Send(lag)
	}
	o.e.led.Emit(workload.SentEvent(o.r, at))
	if o.e.debugOn() {
		o.e.log.Debug("sent", "request_id", req.ID, "lag", lag)
	}
}

func (o *reqObserver) Headers(req *client.Request, at time.Time, status int) {
	o.e.led.Emit(workload.HeadersEvent(o.r, at, status))
	if o.e.debugOn() {
		o.e.log.Debug("headers", "request_id", req.ID, "status", status)
	}
}

func (o *reqObserver) FirstToken(req *client.Request, at time.Time) {
	o.live.first.Store(at.UnixNano())
	o.tally.FirstToken()
	o.e.led.Emit(workload.FirstTokenEvent(o.r, at))
	if o.e.debugOn() {
		o.e.log.Debug("first token", "request_id", req.ID, "ttft", at.Sub(req.Scheduled))
	}
}

// BeforeDeadline asks the server's /debug/requests about the request while the
// server still holds it (before the client cancels).
func (o *reqObserver) BeforeDeadline(req *client.Request, deadline string, phase ledger.Phase) {
	if deadline == "connect" || !o.e.probe.enabled() {
		return
	}
	if d := o.e.probe.Inspect(o.e.reqCtx, req.ID); d != nil {
		o.debug.Store(&d)
	}
}

// outcomes returns the counts so far.
func (e *executor) outcomes() map[ledger.Outcome]int64 {
	m := make(map[ledger.Outcome]int64, len(ledger.Outcomes))
	for i, o := range ledger.Outcomes {
		m[o] = e.counts[i].Load()
	}
	return m
}
