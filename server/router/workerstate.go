package router

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"pdsoak/server/scheduler"
)

// WorkerState is one worker as the router's decisions see it: its role and name, its
// health (Health, with the last error), its outstanding requests and, for a prefill, its
// KV bootstrap address. The Router embeds one in each worker (workers.go) and the
// simulator keeps one per simulated worker; both read and change it only through these
// methods. It is safe for concurrent use: the request path reads health and outstanding
// lock-free.
type WorkerState struct {
	role, name  string
	outstanding atomic.Int64
	healthy     atomic.Bool // mirrors health.Healthy

	mu      sync.Mutex
	boot    string
	health  Health
	lastErr string
	down    chan struct{} // closed when the worker goes unhealthy; replaced when it recovers
}

// NewWorkerState returns the state of a worker that is unhealthy until its first check
// passes; boot is a prefill's bootstrap address ("" until learned; decode workers need
// none).
func NewWorkerState(role, name, boot string) *WorkerState {
	w := &WorkerState{}
	w.init(role, name, boot)
	return w
}

func (w *WorkerState) init(role, name, boot string) {
	w.role, w.name, w.boot, w.down = role, name, boot, make(chan struct{})
	close(w.down)
}

// Role and Name name the worker.
func (w *WorkerState) Role() string { return w.role }
func (w *WorkerState) Name() string { return w.name }

// Healthy reports whether the worker passes its health checks.
func (w *WorkerState) Healthy() bool { return w.healthy.Load() }

// Outstanding is how many attempts hold the worker.
func (w *WorkerState) Outstanding() int64 { return w.outstanding.Load() }

// Checked records the result of one health check (lastErr: why it failed, or "").
func (w *WorkerState) Checked(ok bool, threshold int, lastErr string) (changed bool) {
	return w.track(func(h *Health) bool { return h.Checked(ok, threshold) }, lastErr)
}

// MarkDown marks the worker unhealthy at once after a transport error on a request.
func (w *WorkerState) MarkDown(threshold int, err error) (changed bool) {
	return w.track(func(h *Health) bool { return h.MarkDown(threshold) }, err.Error())
}

// track applies a health decision with lastErr; when it changes the worker's health,
// the mirror and the down channel follow.
func (w *WorkerState) track(decide func(*Health) bool, lastErr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = lastErr
	if !decide(&w.health) {
		return false
	}
	ok := w.health.Healthy
	w.healthy.Store(ok)
	if ok {
		w.down = make(chan struct{})
	} else {
		close(w.down)
	}
	return true
}

// downCh is closed when the worker next goes unhealthy.
func (w *WorkerState) downCh() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.down
}

func (w *WorkerState) bootstrap() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.boot
}

// setBootstrap records a prefill's bootstrap address; it returns the previous one.
func (w *WorkerState) setBootstrap(addr string) (old string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, w.boot = w.boot, addr
	return old
}

// describe is "name healthy", or "name unhealthy: last error".
func (w *WorkerState) describe() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.healthy.Load() {
		return w.name + " healthy"
	}
	if w.lastErr != "" {
		return w.name + " unhealthy: " + w.lastErr
	}
	return w.name + " unhealthy"
}

// Pool is the part of a Flow's IO that needs no IO: the router's workers (their
// WorkerStates, the np prefills first: the Flow's numbering) and its seeded generator.
// The Router's and the simulated router's FlowIO embed one. It is safe for concurrent
// use.
type Pool struct {
	ws  []*WorkerState
	np  int
	mu  sync.Mutex // guards rng
	rng *rand.Rand
}

// NewPool returns the pool of workers ws, the np prefills first, drawing from rng
// (NewRNG).
func NewPool(ws []*WorkerState, np int, rng *rand.Rand) *Pool { return &Pool{ws: ws, np: np, rng: rng} }

// Workers lists the workers' states, the prefills first.
func (p *Pool) Workers() []*WorkerState { return p.ws }

// Candidates describes the workers for a pick (exclude, when not nil, by index).
func (p *Pool) Candidates(exclude []bool) (prefill, decode []Candidate) {
	out := make([]Candidate, len(p.ws))
	for i, w := range p.ws {
		out[i] = Candidate{Healthy: w.healthy.Load(), Excluded: exclude != nil && exclude[i],
			HasBootstrap: i >= p.np || w.bootstrap() != "", Outstanding: w.outstanding.Load()}
	}
	return out[:p.np:p.np], out[p.np:]
}

// Intn draws a tie break.
func (p *Pool) Intn(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.IntN(n)
}

// Uint64 draws for a bootstrap room (Room).
func (p *Pool) Uint64() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Uint64()
}

// Describe says how each worker is ("prefill-0 healthy; decode-0 unhealthy: ...").
func (p *Pool) Describe() string {
	parts := make([]string, len(p.ws))
	for i, w := range p.ws {
		parts[i] = w.describe()
	}
	return strings.Join(parts, "; ")
}

// Worker names worker i.
func (p *Pool) Worker(i int) (role, name string) { return p.ws[i].role, p.ws[i].name }

// Hold counts an attempt as outstanding on workers pi and d (-1: none); Release ends it.
func (p *Pool) Hold(pi, d int)    { p.add(pi, d, 1) }
func (p *Pool) Release(pi, d int) { p.add(pi, d, -1) }

func (p *Pool) add(pi, d int, n int64) {
	for _, i := range [2]int{pi, d} {
		if i >= 0 {
			p.ws[i].outstanding.Add(n)
		}
	}
}

// Routable is nil while a request can be served (HasRoute), else the refusal that says
// why (NoPairError). It draws no randomness.
func (p *Pool) Routable(bugs scheduler.BugSet, fb Fallback) error {
	if ps, ds := p.Candidates(nil); !HasRoute(ps, ds, bugs, fb) {
		return NoPairError(p.Describe())
	}
	return nil
}
