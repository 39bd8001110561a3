package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"pdsoak/harness/phases"
	"pdsoak/metricsel"
	"pdsoak/scenarios"
)

// What a PD stack can hide from its clients (issue 26), watched for the whole load
// phase and the drain: each prefill process's counter that proves a prefill happened
// (pd_counter events, for pd_path) and the entry process's /health (health events, for
// truthful_health, written by the one prober: probe.go, through phases.Health). reports judges both against
// the requests.

// startPDWatch reads every prefill counter at once and then every
// phases.PDCounterEvery until the returned func is called; that func reads the
// counters a last time (after the drain) and waits (idempotent). The entry's /health is
// the one prober's (probe.go).
func (r *runner) startPDWatch(ctx context.Context) (stop func()) {
	counters := r.sc.PDCounters()
	urls := map[string]string{}
	for _, s := range r.tgt.MetricsSources() {
		urls[s.Process] = s.URL
	}
	stopPD := phases.WatchPD(phases.Wall(ctx), counters, func(rctx context.Context) { r.readPDCounters(rctx, counters, urls) })
	return func() { stopPD(ctx.Err() == nil) }
}

// readPDCounters reads every prefill counter in parallel, one pd_counter event each. A
// process that cannot be read (down, restarting) or does not export the counter gets an
// event with Error.
func (r *runner) readPDCounters(ctx context.Context, cs []scenarios.PDCounter, urls map[string]string) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			v, err := r.readCounter(ctx, c, urls[c.Process])
			if ctx.Err() == nil {
				r.led.Emit(phases.PDCounterEvent(c, v, err))
			}
		})
	}
	wg.Wait()
}

func (r *runner) readCounter(ctx context.Context, c scenarios.PDCounter, url string) (float64, error) {
	if url == "" {
		return 0, fmt.Errorf("harness: %s has no metrics endpoint", c.Process)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("harness: pd counter %s: %w", url, err)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("harness: pd counter %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("harness: pd counter %s: status %d", url, resp.StatusCode)
	}
	fams, err := metricsel.ParseText(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("harness: pd counter %s: %w", url, err)
	}
	v, found := c.Selector.Sum(fams)
	if !found {
		return 0, fmt.Errorf("%w: %s does not export %s", phases.ErrCounterAbsent, c.Process, c.Selector)
	}
	return v, nil
}
