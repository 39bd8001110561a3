package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"pdsoak/metricnames"
	"pdsoak/server/cli"
	"pdsoak/server/gen"
	"pdsoak/server/router"
)

// The simulated router does what server/router.Router does, with its decisions taken by
// the same pure functions (router.PickPair, HasPair, Room, DecodeOnly, AfterAttempt,
// PrefillEnded, Health): each request runs attempts on pairs; an attempt opens a connection per
// leg on the links router->prefill-i and router->decode-j, relays decode's tokens, fails
// on a leg's error, a broken connection (transport: the worker is marked down at once)
// or a worker going unhealthy (abort-on-unhealthy), and waits up to
// router.DefaultPrefillGrace for the prefill leg after decode's done. Health checks run
// every --health-interval per worker, each bounded by --health-timeout; their results
// and transport errors go through router.Health, the real router's tracker.
// The router's generator is seeded with --seed as the real one is; the room salt is
// fixed (the real router mixes in its start time).
//
// Simplification: /debug/requests names the pair's workers by process name, where the
// real router shows their URLs.
type simRouter struct {
	t     *topo
	spec  cli.RouterSpec
	rng   *rand.Rand
	salt  uint64
	inc   int
	alive bool
	// paused: SIGSTOP; deferred as on a worker.
	paused   bool
	deferred []func()

	ws    []*rworker // prefill then decode
	np    int
	reqs  []*rreq // in flight, in arrival order
	nextK uint64
}

type rworker struct {
	w           *worker
	h           router.Health
	outstanding int64
	// attempts watching this worker (abort on unhealthy)
	watchers []*attempt
}

type rreq struct {
	key        uint64
	req        *gen.Request
	emit       func(gen.Event)
	start      time.Time
	stage      string
	stageSince time.Time
	room       *uint64
	pName      string
	dName      string
	out        int
	exclude    []bool
	number     int
	last       error
	cur        *attempt
	deadline   *Timer
	deadlined  bool
	gone       bool // client went away
	done       bool
}

type attempt struct {
	r          *rreq
	p, d       *rworker
	pLeg, dLeg *rleg
	sent       bool
	kvArrived  bool
	pWatch     bool // prefill health still matters
	prefillEnd bool
	over       bool
	grace      *Timer
	final      *gen.Event
}

// rleg is one worker leg: the connection and the worker's sequence number.
type rleg struct {
	a    *attempt
	rw   *rworker
	c    *conn
	seq  uint64
	ok   bool // admitted
	over bool
}

func (t *topo) newRouter(args []string) (*simRouter, error) {
	spec, err := cli.RouterConfig(args)
	if err != nil {
		return nil, err
	}
	r := &simRouter{t: t, spec: spec, alive: true, inc: 1,
		rng:  rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15)),
		salt: uint64(t.sc.Seed) * 0x2545f4914f6cdd1d}
	for _, w := range t.prefill {
		r.ws = append(r.ws, &rworker{w: w, h: router.Health{Healthy: true}})
	}
	r.np = len(t.prefill)
	for _, w := range t.decode {
		r.ws = append(r.ws, &rworker{w: w, h: router.Health{Healthy: true}})
	}
	for _, rw := range r.ws {
		r.scheduleCheck(rw, spec.HealthInterval)
	}
	return r, nil
}

func (r *simRouter) post(inc int, fn func()) {
	switch {
	case !r.alive || inc != r.inc:
	case r.paused:
		r.deferred = append(r.deferred, fn)
	default:
		fn()
	}
}

func (r *simRouter) cands(exclude []bool) (ps, ds []router.Candidate) {
	for i, rw := range r.ws {
		c := router.Candidate{Healthy: rw.h.Healthy, HasBootstrap: true, Outstanding: rw.outstanding}
		if exclude != nil {
			c.Excluded = exclude[i]
		}
		if i < r.np {
			ps = append(ps, c)
		} else {
			ds = append(ds, c)
		}
	}
	return ps, ds
}

func (r *simRouter) describe() string {
	s := ""
	for i, rw := range r.ws {
		if i > 0 {
			s += "; "
		}
		st := "healthy"
		if !rw.h.Healthy {
			st = "unhealthy"
		}
		s += rw.w.name + " " + st
	}
	return s
}

// submit is Router.Generate behind the API.
func (r *simRouter) submit(req *gen.Request, emit func(gen.Event)) (func(), error) {
	if err := router.CheckRequest(req); err != nil {
		return nil, err
	}
	ps, ds := r.cands(nil)
	if !router.HasRoute(ps, ds, r.spec.Bugs, r.spec.PDFallback) {
		return nil, router.NoPairError(r.describe())
	}
	now := r.t.loop.Now()
	if req.Deadline.IsZero() && r.spec.RequestTimeout > 0 {
		req.Deadline = now.Add(r.spec.RequestTimeout)
	}
	r.nextK++
	q := &rreq{key: r.nextK, req: req, emit: emit, start: now, stage: "routing", stageSince: now, exclude: make([]bool, len(r.ws))}
	r.reqs = append(r.reqs, q)
	inc := r.inc
	if !req.Deadline.IsZero() {
		q.deadline = r.t.loop.At(req.Deadline.Add(router.DefaultDeadlineGrace), func() {
			r.post(inc, func() {
				q.deadlined = true
				if q.cur != nil {
					r.ended(q.cur, fmt.Errorf("router: %w", context.DeadlineExceeded), false, nil)
				}
			})
		})
	}
	r.attempt(q)
	return func() {
		if q.done {
			return
		}
		q.gone = true
		q.emit = nil
		r.post(inc, func() {
			if q.cur != nil {
				r.ended(q.cur, fmt.Errorf("router: %w", context.Canceled), false, nil)
			}
		})
	}, nil
}

func (r *simRouter) setStage(q *rreq, stage string) {
	if q.stage != stage {
		q.stage, q.stageSince = stage, r.t.loop.Now()
	}
}

// attempt runs one attempt (Router.serve's loop body, then Router.attempt).
func (r *simRouter) attempt(q *rreq) {
	ps, ds := r.cands(q.exclude)
	route, err := router.PickRoute(ps, ds, r.spec.Bugs, r.spec.PDFallback, r.rng.IntN, r.describe)
	if err != nil {
		if q.last != nil {
			err = q.last
		}
		r.finish(q, gen.Event{Done: true, Err: err})
		return
	}
	if route.DecodeOnly { // --pd-fallback decode-only: no room drawn, no prefill leg
		r.attemptDecodeOnly(q, r.ws[r.np+route.Decode])
		return
	}
	pair := route.Pair
	var room uint64
	for {
		v, ok := router.Room(r.rng.Uint64(), r.salt)
		if ok {
			room = v
			break
		}
	}
	p, d := r.ws[pair.Prefill], r.ws[r.np+pair.Decode]
	r.setStage(q, "prefill+decode")
	q.room, q.pName, q.dName = &room, p.w.name, d.w.name
	p.outstanding++
	d.outstanding++
	a := &attempt{r: q, p: p, d: d, pWatch: true}
	q.cur = a
	decodeOnly := router.DecodeOnly(r.spec.Bugs, p.h.Healthy)
	if decodeOnly {
		a.pWatch = false
	}
	wreq := func() *gen.Request {
		wr := *q.req
		wr.Bootstrap = &gen.Bootstrap{Room: room, Addr: p.w.name}
		if !wr.Deadline.IsZero() {
			wr.Deadline = time.UnixMilli(wr.Deadline.UnixMilli()) // DeadlineUnixMs on the wire
		}
		return &wr
	}
	if !decodeOnly {
		a.pLeg = r.leg(a, p, wreq())
	} else {
		a.prefillEnd = true
	}
	if !a.over {
		a.dLeg = r.leg(a, d, wreq())
	}
	if !a.over {
		p.watchers = append(p.watchers, a)
		d.watchers = append(d.watchers, a)
	}
}

// leg opens one worker leg: connect, send the request; the worker's answer comes back
// on the connection.
func (r *simRouter) leg(a *attempt, rw *rworker, req *gen.Request) *rleg {
	l := &rleg{a: a, rw: rw}
	w := rw.w
	link := r.t.links["router->"+w.name]
	role := string(w.role)
	var err error
	if !w.alive {
		err = ErrConnRefused
	} else {
		l.c, err = link.dial()
	}
	if err != nil {
		r.legEnded(l, fmt.Errorf("router: %s %s: %w: %w", role, w.name, gen.ErrUnavailable, err), true)
		return l
	}
	rinc, winc := r.inc, w.inc
	l.c.onBreak = append(l.c.onBreak, func(error) {
		r.post(rinc, func() {
			r.legEnded(l, fmt.Errorf("router: %s %s: %w: %w", role, w.name, gen.ErrInternal, ErrConnReset), true)
		})
	}, func(error) {
		w.post(winc, func() {
			if l.ok {
				w.abort(l.seq)
			}
		})
	})
	l.c.send(up, 256+8*len(req.Prompt), func() {
		w.post(winc, func() {
			w.admit(req, func(ev gen.Event) {
				n := 16 + 4*len(ev.Tokens)
				l.c.send(down, n, func() { r.post(rinc, func() { r.chunk(l, ev) }) })
			}, func(seq uint64, err error) {
				if err != nil {
					werr := gen.ToWorkerError(err).Err()
					l.c.send(down, 256, func() {
						r.post(rinc, func() { r.legEnded(l, fmt.Errorf("router: %s %s: %w", role, w.name, werr), false) })
					})
					return
				}
				l.ok, l.seq = true, seq
				if !l.c.alive || l.over {
					w.abort(seq) // the router gave up while admission was held
				}
			})
		})
	})
	return l
}

// chunk handles one event of a leg's stream.
func (r *simRouter) chunk(l *rleg, ev gen.Event) {
	a := l.a
	if l.over || a.over {
		return
	}
	if ev.Done {
		l.over = true
		l.c.close()
		if ev.Err != nil {
			werr := gen.ToWorkerError(ev.Err).Err()
			r.legEnded(l, fmt.Errorf("router: %s %s: %w", l.rw.w.role, l.rw.w.name, werr), false)
			return
		}
		if l == a.pLeg {
			r.prefillEnded(a, nil)
			return
		}
		// decode's done: finish, letting the prefill leg end on its own for a while.
		final := gen.Event{Tokens: ev.Tokens, Done: true, Finish: ev.Finish, PromptTokens: ev.PromptTokens, CompletionTokens: ev.CompletionTokens}
		if len(ev.Tokens) > 0 {
			r.forward(a, ev.Tokens)
			final.Tokens = nil
		}
		if a.prefillEnd {
			r.succeed(a, final)
			return
		}
		a.final = &final
		inc := r.inc
		a.grace = r.t.loop.After(router.DefaultPrefillGrace, func() { r.post(inc, func() { r.succeed(a, *a.final) }) })
		return
	}
	if l == a.dLeg && len(ev.Tokens) > 0 {
		r.forward(a, ev.Tokens)
	}
}

func (r *simRouter) forward(a *attempt, toks []int) {
	a.kvArrived, a.pWatch = true, false
	q := a.r
	r.setStage(q, "streaming")
	if q.emit != nil {
		q.emit(gen.Event{Tokens: toks})
	}
	a.sent = true
	q.out += len(toks)
}

// legEnded is a leg failing (err) or, for prefill, ending.
func (r *simRouter) legEnded(l *rleg, err error, transport bool) {
	a := l.a
	l.over = true
	if a.over {
		return
	}
	if l == a.pLeg {
		r.prefillEnded(a, &legResult{err, transport})
		return
	}
	r.ended(a, err, transport, l.rw)
}

type legResult struct {
	err       error
	transport bool
}

func (r *simRouter) prefillEnded(a *attempt, res *legResult) {
	a.prefillEnd = true
	a.pWatch = false
	var err error
	if res != nil {
		err = res.err
	}
	switch router.PrefillEnded(err, a.kvArrived, r.spec.Bugs) {
	case router.PrefillFailAttempt:
		r.ended(a, err, res.transport, a.p)
		return
	}
	if a.final != nil {
		r.t.loop.Stop(a.grace)
		r.succeed(a, *a.final)
	}
}

// ended ends a failed attempt: both legs are cancelled; then retry or finish.
func (r *simRouter) ended(a *attempt, err error, transport bool, failed *rworker) {
	if a.over {
		return
	}
	q := a.r
	r.closeAttempt(a) // the attempt is decided before the worker is marked down
	if transport && failed != nil && !q.deadlined && !q.gone {
		r.markDown(failed)
	}
	q.last = err
	final, retry := router.AfterAttempt(router.Attempt{Err: err, Sent: a.sent, Transport: transport, Number: q.number,
		MaxRetries: r.spec.MaxRetries, DeadlinePassed: q.deadlined, ClientGone: q.gone})
	if !retry {
		r.finish(q, gen.Event{Done: true, Err: final})
		return
	}
	if failed != nil {
		q.exclude[slices.Index(r.ws, failed)] = true
	}
	q.number++
	r.attempt(q)
}

func (r *simRouter) succeed(a *attempt, ev gen.Event) {
	if a.over {
		return
	}
	r.closeAttempt(a)
	r.finish(a.r, ev)
}

// closeAttempt cancels what is left of both legs and releases the pair.
func (r *simRouter) closeAttempt(a *attempt) {
	a.over = true
	r.t.loop.Stop(a.grace)
	for _, l := range []*rleg{a.pLeg, a.dLeg} {
		if l == nil || l.c == nil || !l.c.alive {
			continue
		}
		l.over = true
		// The HTTP request is cancelled: the worker's handler sees its client go (an
		// admission still held aborts itself when it ends, see leg).
		w, winc, c := l.rw.w, l.rw.w.inc, l
		l.c.send(up, 0, func() {
			w.post(winc, func() {
				if c.ok {
					w.abort(c.seq)
				}
			})
		})
		cc := l.c
		r.t.loop.At(cc.last[up], func() { cc.close() })
	}
	if a.p != nil { // nil: a decode-only attempt (router_fallback.go)
		a.p.outstanding--
	}
	a.d.outstanding--
	for _, rw := range []*rworker{a.p, a.d} {
		if rw == nil {
			continue
		}
		if i := slices.Index(rw.watchers, a); i >= 0 {
			rw.watchers = slices.Delete(rw.watchers, i, i+1)
		}
	}
}

func (r *simRouter) finish(q *rreq, ev gen.Event) {
	if q.done {
		return
	}
	q.done = true
	q.cur = nil
	r.t.loop.Stop(q.deadline)
	if i := slices.Index(r.reqs, q); i >= 0 {
		r.reqs = slices.Delete(r.reqs, i, i+1)
	}
	if q.emit != nil {
		q.emit(ev)
	}
}

// requests is the router's /debug/requests.
func (r *simRouter) requests() []gen.RequestInfo {
	now := r.t.loop.Now()
	out := make([]gen.RequestInfo, 0, len(r.reqs))
	for _, q := range r.reqs {
		out = append(out, gen.RequestInfo{ID: q.req.ID, Stage: q.stage, AgeSeconds: now.Sub(q.start).Seconds(),
			StageAgeSeconds: now.Sub(q.stageSince).Seconds(), Room: q.room, PromptTokens: len(q.req.Prompt),
			OutputTokens: q.out, Prefill: q.pName, Decode: q.dName})
	}
	slices.SortStableFunc(out, func(a, b gen.RequestInfo) int {
		switch {
		case a.AgeSeconds > b.AgeSeconds:
			return -1
		case a.AgeSeconds < b.AgeSeconds:
			return 1
		}
		return 0
	})
	return out
}

// gauges is the router's /metrics.
func (r *simRouter) gauges() map[string]float64 {
	g := map[string]float64{metricnames.RouterHealthyPairs: 0}
	ps, ds := r.cands(nil)
	if router.HasRoute(ps, ds, r.spec.Bugs, r.spec.PDFallback) {
		g[metricnames.RouterHealthyPairs] = 1
	}
	for _, rw := range r.ws {
		g[metricnames.RouterOutstanding+`{worker="`+rw.w.name+`"}`] = float64(rw.outstanding)
		up := 0.0
		if rw.h.Healthy {
			up = 1
		}
		g[metricnames.RouterWorkerUp+`{worker="`+rw.w.name+`"}`] = up
	}
	return g
}

// crash kills the router: every client stream and every leg breaks.
func (r *simRouter) crash() {
	if !r.alive {
		return
	}
	r.alive = false
	r.inc++
	r.deferred = nil
	reqs := r.reqs
	r.reqs = nil
	for _, q := range reqs {
		if a := q.cur; a != nil && !a.over {
			a.over = true
			for _, l := range []*rleg{a.pLeg, a.dLeg} {
				if l != nil && l.c != nil {
					l.c.breakNow(ErrConnReset)
				}
			}
		}
		q.done = true
		r.t.loop.Stop(q.deadline)
		if q.emit != nil {
			q.emit(gen.Event{Done: true, Err: fmt.Errorf("router: %w", ErrConnReset)})
		}
	}
	for _, rw := range r.ws {
		rw.outstanding, rw.watchers = 0, nil
	}
}

// restart starts a fresh router: every worker unhealthy until its first check passes
// (Router.Start checks them once before serving).
func (r *simRouter) restart() {
	r.alive, r.paused = true, false
	r.inc++
	for _, rw := range r.ws {
		rw.h = router.Health{}
		r.check(rw)
	}
}
