package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// worker is one prefill or decode worker as the router sees it: its health (Health,
// health.go), KV bootstrap address and outstanding requests.
type worker struct {
	url, role, name string
	target          legTarget // url's /generate for the leg client
	lean            bool      // target is usable (http)
	explicitBoot    bool
	outstanding     atomic.Int64
	healthy         atomic.Bool

	mu      sync.Mutex
	boot    string
	health  Health // healthy mirrors health.Healthy for lock-free reads
	lastErr string
	down    chan struct{} // closed when the worker goes unhealthy; replaced when it recovers
}

// downCh is closed when the worker next goes unhealthy.
func (w *worker) downCh() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.down
}

// track applies a health decision (health.go) with lastErr (empty: none); when it
// changes the worker's health, the mirror and the down channel follow. False when
// nothing changed.
func (w *worker) track(decide func(*Health) bool, lastErr string) bool {
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

func (w *worker) bootstrap() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.boot
}

func (r *Router) workers() []*worker {
	return append(append([]*worker(nil), r.prefill...), r.decode...)
}

func (r *Router) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range r.workers() {
		wg.Add(1)
		go func() { defer wg.Done(); r.check(ctx, w) }()
	}
	wg.Wait()
}

// check polls one worker's /health (and /server_info for a prefill whose bootstrap
// address must be learned).
func (r *Router) check(ctx context.Context, w *worker) {
	ctx, cancel := context.WithTimeout(ctx, r.healthTimeout)
	defer cancel()
	err := r.get(ctx, w.url+"/health", nil)
	if err == nil && w.role == "prefill" && !w.explicitBoot {
		var info struct {
			BootstrapAddr string `json:"bootstrap_addr"`
		}
		if err = r.get(ctx, w.url+"/server_info", &info); err == nil {
			if info.BootstrapAddr == "" {
				err = errors.New("server_info has no bootstrap_addr")
			} else {
				w.mu.Lock()
				old := w.boot
				w.boot = info.BootstrapAddr
				w.mu.Unlock()
				if old != "" && old != info.BootstrapAddr {
					r.log.Warn("router: prefill bootstrap address changed", "worker", w.name, "old", old, "new", info.BootstrapAddr)
				}
			}
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // shutting down
	}
	lastErr := ""
	if err != nil {
		lastErr = err.Error()
	}
	if !w.track(func(h *Health) bool { return h.Checked(err == nil, r.failThreshold) }, lastErr) {
		return
	}
	if err == nil {
		r.log.Info("router: worker healthy", "worker", w.name, "url", w.url, "bootstrap_addr", w.bootstrap())
	} else {
		r.log.Warn("router: worker unhealthy", "worker", w.name, "url", w.url, "err", err)
	}
}

func (r *Router) get(ctx context.Context, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %.200s", url, resp.StatusCode, bytes.TrimSpace(body))
	}
	if into != nil {
		return json.Unmarshal(body, into)
	}
	return nil
}

// markDown marks a worker unhealthy at once after a transport error on a request.
func (r *Router) markDown(w *worker, err error) {
	if w.track(func(h *Health) bool { return h.MarkDown(r.failThreshold) }, err.Error()) {
		r.log.Warn("router: worker unhealthy after a request failed", "worker", w.name, "url", w.url, "err", err)
	}
}

// candidates describes ws for the pure decisions (decide.go); exclude, when not nil,
// is by index into ws.
func candidates(ws []*worker, exclude []bool) []Candidate {
	out := make([]Candidate, len(ws))
	for i, w := range ws {
		out[i] = Candidate{Healthy: w.healthy.Load(), Excluded: exclude != nil && exclude[i],
			HasBootstrap: w.role != "prefill" || w.bootstrap() != "", Outstanding: w.outstanding.Load()}
	}
	return out
}

// worker is worker i of the Flow's numbering: the prefills, then the decodes.
func (r *Router) worker(i int) *worker {
	if i < len(r.prefill) {
		return r.prefill[i]
	}
	return r.decode[i-len(r.prefill)]
}

// Healthy is nil while at least one healthy prefill/decode pair exists. It draws no
// randomness, so polling it leaves the seeded tie-breaks unchanged.
func (r *Router) Healthy() error {
	if !HasRoute(candidates(r.prefill, nil), candidates(r.decode, nil), r.bugs, r.fallback) {
		return NoPairError(r.describe())
	}
	return nil
}

// intn draws a tie break from the router's generator.
func (r *Router) intn(n int) int {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return r.rng.IntN(n)
}

func (r *Router) describe() string {
	var parts []string
	for _, w := range r.workers() {
		w.mu.Lock()
		state := "healthy"
		if !w.healthy.Load() {
			state = "unhealthy"
			if w.lastErr != "" {
				state += ": " + w.lastErr
			}
		}
		w.mu.Unlock()
		parts = append(parts, w.name+" "+state)
	}
	return strings.Join(parts, "; ")
}
