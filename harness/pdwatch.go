package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"pdsoak/harness/target"
	"pdsoak/ledger"
	"pdsoak/metricsel"
	"pdsoak/scenarios"
)

// What a PD stack can hide from its clients (issue 26), watched for the whole load
// phase and the drain: each prefill process's counter that proves a prefill happened
// (pd_counter events, for pd_path) and the entry process's /health (health events, for
// truthful_health, written by the one prober: probe.go). reports judges both against
// the requests.
const (
	// pdCounterEvery is how often the prefill counters are read (pd_path's windows are
	// reports.PDWindow, four readings each): the prefills of a process that dies after
	// its last reading are never counted, so the gap is kept short.
	pdCounterEvery = 500 * time.Millisecond
	// healthTimeout bounds one probe: a /health that hangs is a failed probe, not a 200.
	healthTimeout = time.Second
)

// pdCounterSource is one prefill counter and where to read it.
type pdCounterSource struct {
	process, url string // url empty: the process has no metrics endpoint
	sel          metricsel.Selector
}

// pdCounterSources pairs the scenario's prefill counters with the target's metrics
// endpoints.
func pdCounterSources(sc *scenarios.Scenario, srcs []target.Source) []pdCounterSource {
	urls := map[string]string{}
	for _, s := range srcs {
		urls[s.Process] = s.URL
	}
	var out []pdCounterSource
	for _, c := range sc.PDCounters() {
		out = append(out, pdCounterSource{process: c.Process, url: urls[c.Process], sel: c.Selector})
	}
	return out
}

// entryHealth is the process that answers target.url and its health URL.
func entryHealth(sc *scenarios.Scenario, url string) (process, healthURL string) {
	process = "target"
	switch {
	case len(sc.Target.Launch) > 0:
		for _, l := range sc.Target.Launch {
			if l.Role == "router" || l.Role == "colocated" {
				process = l.Name
				break
			}
		}
	case sc.Embedded() && sc.Reference.Prefill == 0 && sc.Reference.Decode == 0:
		process = target.ColocatedName
	case sc.Embedded():
		process = "router"
	}
	return process, healthEndpoint(url)
}

// startPDWatch reads every prefill counter at once and then every pdCounterEvery until
// the returned func is called; that func reads the counters a last time (after the
// drain) and waits (idempotent). The entry's /health is the one prober's (probe.go).
func (r *runner) startPDWatch(ctx context.Context) (stop func()) {
	counters := pdCounterSources(r.sc, r.tgt.MetricsSources())
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if len(counters) > 0 {
		r.readPDCounters(ctx, counters) // the reading at the start, before any load
		wg.Go(func() { every(wctx, pdCounterEvery, func() { r.readPDCounters(wctx, counters) }) })
	}
	return sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		if len(counters) > 0 && ctx.Err() == nil {
			r.readPDCounters(ctx, counters) // the reading at the end
		}
	})
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// readPDCounters reads every prefill counter in parallel, one pd_counter event each. A
// process that cannot be read (down, restarting) or does not export the counter gets an
// event with Error: reports then counts no prefill for it since its last reading.
func (r *runner) readPDCounters(ctx context.Context, cs []pdCounterSource) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			ev := ledger.Event{Type: ledger.EventPDCounter, Source: c.process, Detail: c.sel.String()}
			v, err := r.readCounter(ctx, c)
			if err != nil {
				ev.Error = err.Error()
			} else {
				ev.Metrics = map[string]float64{c.sel.String(): v}
			}
			if ctx.Err() == nil {
				r.led.Emit(ev)
			}
		})
	}
	wg.Wait()
}

func (r *runner) readCounter(ctx context.Context, c pdCounterSource) (float64, error) {
	if c.url == "" {
		return 0, fmt.Errorf("harness: %s has no metrics endpoint", c.process)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return 0, fmt.Errorf("harness: pd counter %s: %w", c.url, err)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("harness: pd counter %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("harness: pd counter %s: status %d", c.url, resp.StatusCode)
	}
	fams, err := metricsel.ParseText(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("harness: pd counter %s: %w", c.url, err)
	}
	v, found := c.sel.Sum(fams)
	if !found {
		return 0, fmt.Errorf("harness: %s does not export %s", c.process, c.sel)
	}
	return v, nil
}
