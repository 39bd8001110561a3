package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"pdsoak/harness/judge"
	"pdsoak/harness/target"
	"pdsoak/ledger"
)

// scrapeWarnEvery spaces out the log lines about failed metric scrapes during load.
const scrapeWarnEvery = 30 * time.Second

// scraper fetches Prometheus endpoints, each scrape bounded by timeout.
type scraper struct {
	hc      *http.Client
	timeout time.Duration
}

// scrape fetches and parses one Prometheus endpoint.
func (s scraper) scrape(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("harness: scrape %s: %w", url, err)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("harness: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("harness: scrape %s: status %d", url, resp.StatusCode)
	}
	return judge.ParseMetrics(io.LimitReader(resp.Body, 16<<20))
}

// scrapeAll scrapes every source in parallel.
func (s scraper) scrapeAll(ctx context.Context, srcs []target.Source) ([]map[string]float64, []error) {
	vals := make([]map[string]float64, len(srcs))
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Go(func() { vals[i], errs[i] = s.scrape(ctx, src.URL) })
	}
	wg.Wait()
	return vals, errs
}

// sampler records the interesting gauges of every metrics source every interval. A
// failed scrape leaves a gap in the samples and a log line now and then.
func sampler(ctx context.Context, s scraper, srcs []target.Source, led *ledger.Writer, log *slog.Logger, every time.Duration) {
	if len(srcs) == 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	warn := rate.Sometimes{First: 1, Interval: scrapeWarnEvery}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		vals, errs := s.scrapeAll(ctx, srcs)
		for i, v := range vals {
			if errs[i] != nil {
				if ctx.Err() == nil {
					warn.Do(func() { log.Warn("metrics sample failed", "process", srcs[i].Process, "err", errs[i]) })
				}
				continue
			}
			led.Emit(judge.SampleEvent(srcs[i].Process, v))
		}
	}
}

// leakCheck scrapes every source until all leak gauges read 0 or bound passes, each
// round judged by judge.JudgeLeaks (through judge.LeakRound).
func leakCheck(ctx context.Context, s scraper, srcs []target.Source, bound, poll time.Duration) judge.LeakVerdict {
	if len(srcs) == 0 {
		return judge.LeakVerdict{Detail: judge.LeakNoMetrics}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	procs := make([]string, len(srcs))
	for i, src := range srcs {
		procs[i] = src.Process
	}
	round := judge.NewLeakRound(procs)
	for {
		vals, errs := s.scrapeAll(ctx, srcs)
		v := round.Update(vals, errs, time.Since(start))
		if v.Passed {
			return v
		}
		select {
		case <-ctx.Done():
			return v
		case <-time.After(poll):
		}
	}
}
