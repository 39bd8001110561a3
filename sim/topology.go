package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"pdsoak/harness/target"
	"pdsoak/scenarios"
	"pdsoak/server/api"
	"pdsoak/server/engine"
	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
)

// ProcessColocated, ProcessRouter: the process names of the embedded topology, as the
// launcher and harness/target name them (workers are "prefill-i" and "decode-j").
const (
	ProcessColocated = target.ColocatedName
	ProcessRouter    = "router"
)

// RestartDelay is how long a killed process takes to be back (process_restart, and
// process_kill/decode_crash/prefill_crash on revert): a pdserver worker with the tinyref
// or simtime backend starts and binds in a few hundred milliseconds.
const RestartDelay = 500 * time.Millisecond

// topo is the simulated reference topology (NewTopology).
type topo struct {
	loop  *Loop
	sc    *scenarios.Scenario
	rng   *rand.Rand // toxicity and jitter draws
	fpRNG *rand.Rand // failpoint percentage draws

	colocated       *worker
	prefill, decode []*worker
	router          *simRouter
	routerArgs      []string

	links     map[string]*link
	linkOrder []*link
}

var _ Server = (*topo)(nil)

// NewTopology builds the scenario's reference topology on loop: colocated when
// reference.prefill and reference.decode are both 0, else a router with prefill-i and
// decode-j workers and their links. Each worker's flags are resolved by
// cli.WorkerConfig, the router's by cli.RouterConfig, exactly as the real processes
// parse them. A scenario with an external target, or a worker flag the simulator cannot
// model, is refused with an error wrapping ErrNotModelled.
func NewTopology(loop *Loop, sc *scenarios.Scenario) (Server, error) {
	if sc == nil {
		return nil, errors.New("sim: nil scenario")
	}
	if err := Refuse(sc); err != nil {
		return nil, err
	}
	ref := sc.Reference
	if ref.Netns {
		return nil, fmt.Errorf("%w: reference.netns (network namespaces are a real-network feature)", ErrNotModelled)
	}
	t := &topo{loop: loop, sc: sc, links: map[string]*link{},
		rng: newRNG(sc.Seed, 1), fpRNG: newRNG(sc.Seed, 2)}
	common := target.ReferenceArgs(ref) // as the launcher starts them
	if ref.Prefill == 0 && ref.Decode == 0 {
		w, err := t.newWorker(ProcessColocated, engine.RoleColocated, 0, common)
		if err != nil {
			return nil, fmt.Errorf("sim: %s: %w", ProcessColocated, err)
		}
		t.colocated = w
		return t, nil
	}
	if ref.Prefill <= 0 || ref.Decode <= 0 {
		return nil, fmt.Errorf("sim: reference needs prefill and decode workers (got %d, %d)", ref.Prefill, ref.Decode)
	}
	// The workers and links the scenario's topology names (the launcher's names).
	topology := sc.Topology()
	for _, p := range topology.Processes {
		role, args, ws := engine.Role(p.Role), ref.PrefillArgs, &t.prefill
		switch role {
		case engine.RolePrefill:
		case engine.RoleDecode:
			args, ws = ref.DecodeArgs, &t.decode
		default:
			continue // the router, built once its workers are
		}
		w, err := t.newWorker(p.Name, role, len(*ws), append(slices.Clone(common), args...))
		if err != nil {
			return nil, fmt.Errorf("sim: %s: %w", p.Name, err)
		}
		*ws = append(*ws, w)
	}
	for _, l := range topology.Links {
		t.newLink(l.Name, l.From, l.To, l.KV)
	}
	t.routerArgs = target.RouterArgs(ref)
	r, err := t.newRouter(t.routerArgs)
	if err != nil {
		return nil, fmt.Errorf("sim: router: %w", err)
	}
	t.router = r
	return t, nil
}

// draw is the failpoint percentage draw (failpoint.Fire), from the scenario's seed.
func (t *topo) draw(percent float64) bool { return failpoint.Draw(percent, t.fpRNG.Float64) }

// workers lists every worker in process order.
func (t *topo) workers() []*worker {
	if t.colocated != nil {
		return []*worker{t.colocated}
	}
	return append(append([]*worker(nil), t.prefill...), t.decode...)
}

func (t *topo) worker(name string) *worker {
	for _, w := range t.workers() {
		if w.name == name {
			return w
		}
	}
	return nil
}

// processDied breaks every router link of a dead process.
func (t *topo) processDied(name string) {
	for _, l := range t.linkOrder {
		if !l.kv && (l.to == name || l.from == name) {
			l.breakAll(ErrConnReset)
		}
	}
}

// Submit implements Server.
func (t *topo) Submit(req *gen.Request, emit func(gen.Event)) (func(), error) {
	if req == nil {
		return nil, fmt.Errorf("sim: nil request: %w", gen.ErrInvalid)
	}
	if t.colocated != nil {
		return t.submitColocated(req, emit)
	}
	r := t.router
	if !r.alive {
		return nil, ErrConnRefused
	}
	if r.paused {
		// A stopped process accepts the connection but answers nothing: the request
		// waits, and the headers come when the router thaws (an approximation: the
		// harness sees them at Submit).
		var cancelled bool
		var inner func()
		r.deferred = append(r.deferred, func() {
			if cancelled {
				return
			}
			c, err := r.submit(req, emit)
			if err != nil {
				emit(gen.Event{Done: true, Err: err})
				return
			}
			inner = c
		})
		return func() {
			cancelled = true
			if inner != nil {
				inner()
			}
		}, nil
	}
	return r.submit(req, emit)
}

// APIOptions implements FrontEnd: the front end checks each request against the
// context length as the real one (server/api): the colocated worker's own, else the
// router's --context-length or, as the real router asks it, the first decode worker's.
func (t *topo) APIOptions() []api.Option {
	var limit int
	switch {
	case t.colocated != nil:
		limit = t.colocated.spec.Engine.ContextLength
	case t.router.spec.ContextLength > 0:
		limit = t.router.spec.ContextLength
	default:
		limit = t.decode[0].spec.Engine.ContextLength
	}
	return []api.Option{api.WithModelName(t.sc.Target.Model), api.WithContextLength(limit)}
}

// submitColocated is the colocated API in front of one engine.
func (t *topo) submitColocated(req *gen.Request, emit func(gen.Event)) (func(), error) {
	w := t.colocated
	if !w.alive {
		return nil, ErrConnRefused
	}
	var seq uint64
	var live, cancelled, heldNow bool
	var gone func() // while the admission is held
	out := func(ev gen.Event) {
		if !cancelled {
			emit(ev)
		}
	}
	admit := func() error {
		var err error
		seq, err = w.arrive(req, out)
		live = err == nil
		if live && cancelled {
			w.abort(seq)
		}
		return err
	}
	inc := w.inc
	cancel := func() {
		if cancelled {
			return
		}
		cancelled = true
		w.post(inc, func() {
			switch {
			case live:
				w.abort(seq)
			case gone != nil:
				gone()
			}
		})
	}
	if w.paused {
		w.deferred = append(w.deferred, func() {
			if cancelled {
				return
			}
			if err := admit(); err != nil {
				out(gen.Event{Done: true, Err: err})
			}
		})
		return cancel, nil
	}
	var refused error
	gone = w.admit(req, out, func(s uint64, err error) {
		seq, live, refused = s, err == nil, err
		if live && cancelled {
			w.abort(s)
		}
		if err != nil && heldNow {
			out(gen.Event{Done: true, Err: err}) // the hold ended in a refusal
		}
	})
	heldNow = gone != nil
	if !heldNow && refused != nil {
		return nil, refused
	}
	// A crash ends the stream: the connection resets.
	return cancel, nil
}

// Requests implements Server: each live, unpaused process's /debug/requests.
func (t *topo) Requests() map[string][]gen.RequestInfo {
	return answers(t, (*simRouter).requests, (*worker).requests)
}

// Gauges implements Server: what a scrape of each reachable process reads.
func (t *topo) Gauges() map[string]map[string]float64 {
	return answers(t, (*simRouter).gauges, (*worker).gauges)
}

// answers asks every process that would answer now (alive, not stopped), by name.
func answers[T any](t *topo, router func(*simRouter) T, worker func(*worker) T) map[string]T {
	out := map[string]T{}
	if r := t.router; r != nil && r.alive && !r.paused {
		out[ProcessRouter] = router(r)
	}
	for _, w := range t.workers() {
		if w.alive && !w.paused {
			out[w.name] = worker(w)
		}
	}
	return out
}
