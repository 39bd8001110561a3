package router

import (
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

// State is w itself (so that a type embedding a WorkerState hands it to Candidates).
func (w *WorkerState) State() *WorkerState { return w }

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

// Stated is a worker with a WorkerState (a *WorkerState, or a type embedding one).
type Stated interface{ State() *WorkerState }

// Candidates describes workers ws, the np prefills first, for a pick (exclude, when not
// nil, by index into ws).
func Candidates[W Stated](ws []W, np int, exclude []bool) (prefill, decode []Candidate) {
	out := make([]Candidate, len(ws))
	for i, x := range ws {
		w := x.State()
		out[i] = Candidate{Healthy: w.healthy.Load(), Excluded: exclude != nil && exclude[i],
			HasBootstrap: i >= np || w.bootstrap() != "", Outstanding: w.outstanding.Load()}
	}
	return out[:np:np], out[np:]
}

// Describe says how each of ws is ("prefill-0 healthy; decode-0 unhealthy: ...").
func Describe[W Stated](ws []W) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.State().describe()
	}
	return strings.Join(parts, "; ")
}

// Hold adds n (1 or -1) to the outstanding attempts of workers p and d of ws (-1: none).
func Hold[W Stated](ws []W, p, d int, n int64) {
	for _, i := range [2]int{p, d} {
		if i >= 0 {
			ws[i].State().outstanding.Add(n)
		}
	}
}

// Routable is nil while a request can be served (HasRoute over ws, the np prefills
// first), else the refusal that says why (NoPairError). It draws no randomness.
func Routable[W Stated](ws []W, np int, bugs scheduler.BugSet, fb Fallback) error {
	if ps, ds := Candidates(ws, np, nil); !HasRoute(ps, ds, bugs, fb) {
		return NoPairError(Describe(ws))
	}
	return nil
}
