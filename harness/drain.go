package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"pdsoak/ledger"
	"sort"
	"strings"
	"sync"
	"time"
)

// Exported knobs of the post-load checks.
var (
	// SampleInterval is how often server gauges are sampled into the ledger during a run.
	SampleInterval = 2 * time.Second
	// LeakPollInterval is how often gauges are scraped while waiting for them to drain.
	LeakPollInterval = 250 * time.Millisecond
	// ScrapeTimeout bounds one metrics scrape.
	ScrapeTimeout = 2 * time.Second
	// CancelDrain is how long in-flight requests may keep running after Ctrl-C.
	CancelDrain = 2 * time.Second
	// ResolveAfterCancel bounds the wait for cancelled requests to return.
	ResolveAfterCancel = 10 * time.Second
)

// scrape fetches and parses one Prometheus endpoint.
func scrape(ctx context.Context, hc *http.Client, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("harness: scrape %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("harness: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("harness: scrape %s: status %d", url, resp.StatusCode)
	}
	return ParseMetrics(io.LimitReader(resp.Body, 16<<20))
}

// scrapeAll scrapes every source in parallel.
func scrapeAll(ctx context.Context, hc *http.Client, srcs []DebugSource) ([]map[string]float64, []error) {
	vals := make([]map[string]float64, len(srcs))
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals[i], errs[i] = scrape(ctx, hc, s.URL)
		}()
	}
	wg.Wait()
	return vals, errs
}

// sampler records the interesting gauges of every metrics source every interval.
func sampler(ctx context.Context, hc *http.Client, srcs []DebugSource, led *ledger.Writer, every time.Duration) {
	if len(srcs) == 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		vals, _ := scrapeAll(ctx, hc, srcs)
		for i, v := range vals {
			if v == nil {
				continue
			}
			m := map[string]float64{}
			for name, x := range v {
				if IsLeakGauge(name) || contains(sampleGauges, name) {
					m[name] = x
				}
			}
			led.Emit(ledger.Event{Type: ledger.EventSample, Source: srcs[i].Process, Metrics: m})
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// leakResult is the outcome of the leak check.
type leakResult struct {
	passed   bool
	skipped  bool
	residual map[string]float64 // "process/gauge" -> value, nonzero gauges only
	detail   string
	waited   time.Duration
}

// leakCheck scrapes every source until all leak gauges read 0 or bound passes.
func leakCheck(ctx context.Context, hc *http.Client, srcs []DebugSource, bound time.Duration) leakResult {
	if len(srcs) == 0 {
		return leakResult{skipped: true, detail: "skipped: the target has no metrics endpoint"}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var last leakResult
	for {
		vals, errs := scrapeAll(ctx, hc, srcs)
		res := leakResult{passed: true, residual: map[string]float64{}}
		var problems []string
		seen := 0
		for i, v := range vals {
			if errs[i] != nil {
				res.passed = false
				problems = append(problems, fmt.Sprintf("%s: %v", srcs[i].Process, errs[i]))
				continue
			}
			for name, x := range v {
				if !IsLeakGauge(name) {
					continue
				}
				seen++
				if x != 0 {
					res.passed = false
					res.residual[srcs[i].Process+"/"+name] = x
				}
			}
		}
		if seen == 0 && len(problems) == 0 {
			res.passed = false
			problems = append(problems, "no running/queued gauge (sglang:* or vllm:*) found in any scrape")
		}
		keys := make([]string, 0, len(res.residual))
		for k := range res.residual {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			problems = append(problems, fmt.Sprintf("%s = %g", k, res.residual[k]))
		}
		res.waited = time.Since(start)
		if res.passed {
			res.detail = fmt.Sprintf("running and queued gauges at 0 after %v (%d gauges on %d endpoints)",
				res.waited.Round(time.Millisecond), seen, len(srcs))
			return res
		}
		res.detail = fmt.Sprintf("not drained after %v: %s", res.waited.Round(time.Millisecond), strings.Join(problems, "; "))
		last = res
		select {
		case <-ctx.Done():
			return last
		case <-time.After(LeakPollInterval):
		}
	}
}
