package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"pdsoak/metricnames"
	"pdsoak/server/api"
	"pdsoak/server/cli"
	"pdsoak/server/gen"
	"pdsoak/server/router"
)

// The simulated router is the real router's decisions on the event loop: router.NewCore
// builds them from the router's options (cli.RouterConfig: the same flags, defaults and
// seed as the process), router.Flow runs each request (pick, legs, relay, prefill end,
// retry, final event, stages) and router.HealthChecks the health checks
// (router_health.go); this file is only their IO. A simReq opens the legs as
// connections on the links router->prefill-i and router->decode-j and hands their
// events, the deadline, the client leaving and the prefill grace to the Flow as Loop
// events. The room salt is fixed (the real router mixes in its start time).
//
// Simplifications: /debug/requests names the pair's workers by process name, where the
// real router shows their URLs; a starting router's /metrics and /debug/requests answer.
type simRouter struct {
	*router.Core // the workers' states, the generator, the Flows' configuration, the checks
	t            *topo
	spec         cli.RouterSpec
	proc              // its life: events wait while it is stopped
	starting     bool // restarted, its first round of checks not over: it refuses connections

	sw   []*worker // the workers' processes, prefill then decode (the Flow's numbering)
	reqs []*simReq // in flight, in arrival order
}

// simReq is one request: its Flow and the Flow's IO (the router-wide part of which is
// simRouter's).
type simReq struct {
	*simRouter
	f               router.Flow
	emit            func(gen.Event)
	deadline, grace *Timer
	legs            [2]*rleg // the current attempt's decode and prefill legs
}

// rleg is one worker leg: the connection and the worker's sequence number.
type rleg struct {
	q       *simReq
	n       int // the attempt
	prefill bool
	w       *worker
	c       *conn
	seq     uint64
	ok      bool   // admitted
	gone    func() // while the worker holds its admission: ends the hold (the leg went)
	over    bool
}

func (t *topo) newRouter(args []string) (*simRouter, error) {
	spec, err := cli.RouterConfig(args)
	if err != nil {
		return nil, err
	}
	r := &simRouter{t: t, spec: spec, sw: append(slices.Clone(t.prefill), t.decode...)}
	r.start()
	r.boot()
	// The launcher waits for every worker: the first round passed as the router started.
	now := t.loop.Now()
	r.Health.Begin(now)
	for i := range r.sw {
		r.answered(i, nil, now)
	}
	return r, nil
}

// boot builds the router's decisions as its process does (every worker unhealthy until
// its first check passes; bootstrap addresses are the processes' names, as the launcher
// passes --prefill-bootstrap).
func (r *simRouter) boot() {
	ws := make([]*router.WorkerState, len(r.sw))
	for i, w := range r.sw {
		ws[i] = router.NewWorkerState(string(w.role), w.name, w.name)
	}
	r.Core = router.NewCore(ws, len(r.t.prefill), append(slices.Clip(r.spec.Options),
		router.WithRoomSalt(uint64(r.t.sc.Seed)*0x2545f4914f6cdd1d), router.WithLogger(nil))...)
}

// The Flow's IO on the event loop (the rest is the Pool's).

func (r *simRouter) Now() time.Time { return r.t.loop.Now() }

// submit is Router.Generate behind the API.
func (r *simRouter) submit(req *gen.Request, emit func(gen.Event)) (func(), error) {
	if r.starting {
		return nil, ErrConnRefused // not listening yet
	}
	if err := router.CheckRequest(req); err != nil {
		return nil, err
	}
	if err := r.Routable(); err != nil {
		return nil, err
	}
	// The router's API stamps --request-timeout when its handler runs (after a SIGSTOP:
	// when the router thaws), as the real one.
	api.StampDeadline(req, r.t.loop.Now(), r.spec.RequestTimeout)
	q := &simReq{simRouter: r, emit: emit}
	q.f.Init(q, &r.Flow, req, nil)
	r.reqs = append(r.reqs, q)
	inc := r.inc
	if t := q.f.GiveUpAt(); !t.IsZero() {
		q.deadline = r.t.loop.At(t, func() { r.post(inc, func() { q.f.ContextEnded(context.DeadlineExceeded) }) })
	}
	q.f.Start()
	return func() {
		if q.f.Over() {
			return
		}
		q.emit = nil
		r.post(inc, func() { q.f.ContextEnded(context.Canceled) })
	}, nil
}

// Forward and Final write to the client's stream (nil once the client went away).
func (q *simReq) Forward(toks []int) error { q.Final(gen.Event{Tokens: toks}); return nil }

func (q *simReq) Final(ev gen.Event) {
	if q.emit != nil {
		q.emit(ev)
	}
}

func (q *simReq) Grace(d time.Duration) {
	q.t.loop.Stop(q.grace)
	if inc := q.inc; d > 0 {
		q.grace = q.t.loop.After(d, func() { q.post(inc, q.f.GraceOver) })
	}
}

func (q *simReq) Done() {
	q.t.loop.Stop(q.deadline)
	if i := slices.Index(q.reqs, q); i >= 0 {
		q.reqs = slices.Delete(q.reqs, i, i+1)
	}
}

// StartLegs opens the decode leg, then the prefill leg (as the real router writes them).
func (q *simReq) StartLegs(l router.Legs) error {
	wreq := func() *gen.Request {
		wr := *q.f.Request()
		if l.Prefill >= 0 {
			wr.Bootstrap = &gen.Bootstrap{Room: l.Room, Addr: q.sw[l.Prefill].name}
		} else {
			wr.DecodeOnly = true
		}
		if !wr.Deadline.IsZero() {
			wr.Deadline = time.UnixMilli(wr.Deadline.UnixMilli()) // DeadlineUnixMs on the wire
		}
		return &wr
	}
	q.legs = [2]*rleg{q.leg(l.Attempt, false, l.Decode, wreq())}
	if l.Prefill >= 0 && !l.SkipPrefill {
		q.legs[1] = q.leg(l.Attempt, true, l.Prefill, wreq())
	}
	return nil
}

// leg opens one worker leg: connect, send the request; the worker's answer comes back
// on the connection. A refused connect comes back as a Loop event too.
func (q *simReq) leg(n int, prefill bool, i int, req *gen.Request) *rleg {
	r, w := q.simRouter, q.sw[i]
	l := &rleg{q: q, n: n, prefill: prefill, w: w}
	role := string(w.role)
	rinc, winc := r.inc, w.inc
	err := ErrConnRefused
	if w.alive {
		l.c, err = r.t.links["router->"+w.name].dial()
	}
	if err != nil {
		r.t.loop.After(0, func() { r.post(rinc, func() { l.end(router.LegUnreachable(role, w.name, err), true) }) })
		return l
	}
	l.c.onBreak = append(l.c.onBreak, func(error) {
		r.post(rinc, func() { l.end(router.LegBroken(role, w.name, ErrConnReset), true) })
	}, func(error) { w.post(winc, func() { l.abort() }) })
	l.c.send(up, 256+8*len(req.Prompt), func() {
		w.post(winc, func() {
			l.gone = w.admit(req, func(ev gen.Event) {
				l.c.send(down, 16+4*len(ev.Tokens), func() { r.post(rinc, func() { l.event(ev) }) })
			}, func(seq uint64, err error) {
				if err != nil {
					l.c.send(down, 256, func() {
						r.post(rinc, func() { l.end(router.LegError(role, w.name, gen.ToWorkerError(err).Err()), false) })
					})
					return
				}
				l.ok, l.seq, l.gone = true, seq, nil
				if !l.c.alive || l.over {
					w.abort(seq) // the router gave up while admission was held
				}
			})
		})
	})
	return l
}

// event is one event of the leg's stream, as the router reads it.
func (l *rleg) event(ev gen.Event) {
	if l.over {
		return
	}
	if ev.Done {
		l.over = true
		l.c.close()
	}
	switch {
	case ev.Err != nil:
		l.end(router.LegError(string(l.w.role), l.w.name, gen.ToWorkerError(ev.Err).Err()), false)
	case !l.prefill:
		l.q.f.Decode(l.n, ev)
	case ev.Done:
		l.q.f.PrefillEnded(l.n, nil, false)
	}
}

// end is the leg failing (err) or, for prefill, ending.
func (l *rleg) end(err error, transport bool) {
	l.over = true
	if l.prefill {
		l.q.f.PrefillEnded(l.n, err, transport)
	} else {
		l.q.f.DecodeFailed(l.n, err, transport)
	}
}

func (l *rleg) abort() {
	switch {
	case l.ok:
		l.w.abort(l.seq)
	case l.gone != nil:
		l.gone()
	}
}

// CancelLegs cancels the HTTP requests of the legs still open: each worker's handler sees
// its client go (an admission still held aborts itself when it ends, see leg).
func (q *simReq) CancelLegs() {
	for _, l := range q.legs {
		if l == nil || l.c == nil || !l.c.alive {
			continue
		}
		l.over = true
		w, winc, c := l.w, l.w.inc, l.c
		c.send(up, 0, func() { w.post(winc, l.abort) })
		q.t.loop.At(c.last[up], c.close)
	}
	q.legs = [2]*rleg{}
}

// requests is the router's /debug/requests.
func (r *simRouter) requests() []gen.RequestInfo {
	now := r.t.loop.Now()
	out := make([]gen.RequestInfo, 0, len(r.reqs))
	for _, q := range r.reqs {
		out = append(out, q.f.Info(now, func(i int) string { return r.sw[i].name }))
	}
	router.SortRequests(out)
	return out
}

// gauges is the router's /metrics.
func (r *simRouter) gauges() map[string]float64 {
	g := map[string]float64{metricnames.RouterHealthyPairs: router.Up(r.Routable() == nil)}
	for _, w := range r.Workers() {
		label := `{worker="` + w.Name() + `"}`
		g[metricnames.RouterOutstanding+label] = float64(w.Outstanding())
		g[metricnames.RouterWorkerUp+label] = router.Up(w.Healthy())
	}
	return g
}

// crash kills the router: every client stream and every leg breaks.
func (r *simRouter) crash() {
	if !r.alive {
		return
	}
	r.die()
	for _, q := range r.reqs {
		for _, l := range q.legs {
			if l != nil && l.c != nil {
				l.c.breakNow(ErrConnReset)
			}
		}
		r.t.loop.Stop(q.deadline)
		r.t.loop.Stop(q.grace)
		if !q.f.Delivered() {
			q.Final(gen.Event{Done: true, Err: fmt.Errorf("router: %w", ErrConnReset)})
		}
	}
	r.reqs = nil // the workers' states start afresh at restart
}

// restart starts a fresh router from its options, which refuses connections until its
// first round of checks is over (Router.Start runs it before serving).
func (r *simRouter) restart() {
	r.start()
	r.starting = true
	r.boot()
	r.round()
}
