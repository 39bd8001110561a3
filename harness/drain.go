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
	"pdsoak/harness/phases"
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

// readAll is srcs' phases.ReadAll: every source scraped in parallel.
func (s scraper) readAll(srcs []target.Source) phases.ReadAll {
	return func(ctx context.Context) ([]map[string]float64, []error) { return s.scrapeAll(ctx, srcs) }
}

// processes are the sources' process names.
func processes(srcs []target.Source) []string {
	out := make([]string, len(srcs))
	for i, s := range srcs {
		out[i] = s.Process
	}
	return out
}

// startSampler records the interesting gauges of every metrics source every interval
// until stop (phases.Sample). A failed scrape leaves a gap in the samples and a log
// line now and then.
func startSampler(ctx context.Context, s scraper, srcs []target.Source, led *ledger.Writer, log *slog.Logger, every time.Duration) (stop func()) {
	warn := rate.Sometimes{First: 1, Interval: scrapeWarnEvery}
	return phases.Sample(phases.Wall(ctx), every, processes(srcs), s.readAll(srcs), led.Emit, func(p string, err error) {
		warn.Do(func() { log.Warn("metrics sample failed", "process", p, "err", err) })
	})
}

// leakCheck is the leak_check event (phases.CheckLeaks): every source scraped until
// all leak gauges read 0 or bound passes, each scrape cut short by the bound; after
// Ctrl-C, no waiting.
func leakCheck(ctx context.Context, s scraper, srcs []target.Source, bound, poll time.Duration) ledger.Event {
	interrupted := ctx.Err() != nil
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	read := s.readAll(srcs)
	return phases.CheckLeaks(phases.Wall(ctx), interrupted, processes(srcs), func(context.Context) ([]map[string]float64, []error) { return read(ctx) }, bound, poll)
}
