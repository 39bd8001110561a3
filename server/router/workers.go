package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// worker is one prefill or decode worker as the router sees it: its WorkerState
// (health, outstanding requests, KV bootstrap address; workerstate.go) and where it is.
type worker struct {
	WorkerState
	url          string
	target       legTarget // url's /generate for the leg client
	lean         bool      // target is usable (http)
	explicitBoot bool
}

func (r *Router) workers() []*worker { return r.all }

// checkAll runs one round of health checks (HealthChecks) and returns when the next
// begins.
func (r *Router) checkAll(ctx context.Context) (next time.Time) {
	timeout := r.core.Health.Begin(time.Now())
	var wg sync.WaitGroup
	for i, w := range r.workers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n, over := r.check(ctx, i, w, timeout); over {
				next = n // one check's answer ends the round
			}
		}()
	}
	wg.Wait()
	return next
}

// check polls worker i's /health (and /server_info for a prefill whose bootstrap
// address must be learned) and hands the answer to the health checks.
func (r *Router) check(ctx context.Context, i int, w *worker, timeout time.Duration) (next time.Time, over bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
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
				if old := w.setBootstrap(info.BootstrapAddr); old != "" && old != info.BootstrapAddr {
					r.log.Warn("router: prefill bootstrap address changed", "worker", w.name, "old", old, "new", info.BootstrapAddr)
				}
			}
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		over, next := r.core.Health.Unanswered(time.Now()) // shutting down
		return next, over
	}
	changed, over, next := r.core.Health.Answered(i, err, time.Now())
	switch {
	case !changed:
	case err == nil:
		r.log.Info("router: worker healthy", "worker", w.name, "url", w.url, "bootstrap_addr", w.bootstrap())
	default:
		r.log.Warn("router: worker unhealthy", "worker", w.name, "url", w.url, "err", err)
	}
	return next, over
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

// markDown marks worker i unhealthy at once after a transport error on a request.
func (r *Router) markDown(i int, err error) {
	if r.core.Health.MarkDown(i, err) {
		w := r.worker(i)
		r.log.Warn("router: worker unhealthy after a request failed", "worker", w.name, "url", w.url, "err", err)
	}
}

// worker is worker i of the Flow's numbering: the prefills, then the decodes.
func (r *Router) worker(i int) *worker { return r.all[i] }

// Healthy is nil while at least one healthy prefill/decode pair exists (Routable). It
// draws no randomness, so polling it leaves the seeded tie-breaks unchanged.
func (r *Router) Healthy() error { return r.core.Routable() }
