package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

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
	return ParseMetrics(io.LimitReader(resp.Body, 16<<20))
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
			m := map[string]float64{}
			for name, x := range v {
				if IsLeakGauge(name) || slices.Contains(sampleGauges, name) {
					m[name] = x
				}
			}
			led.Emit(ledger.Event{Type: ledger.EventSample, Source: srcs[i].Process, Metrics: m})
		}
	}
}

// leakResult is the outcome of the leak check. skipped means not evaluated: the
// check could not tell, and passed means nothing.
type leakResult struct {
	passed   bool
	skipped  bool
	residual map[string]float64 // "process/gauge" -> value, nonzero gauges only
	detail   string
	waited   time.Duration
}

// leakCheck scrapes every source until all leak gauges read 0 or bound passes. It
// passes when one round of scrapes answered everywhere with every leak gauge at 0; it
// fails when the last answer of some source still has a gauge above 0; anything else
// (no source, a source that never answered or stopped answering, no leak gauge at all)
// is not evaluated.
func leakCheck(ctx context.Context, s scraper, srcs []target.Source, bound, poll time.Duration) leakResult {
	if len(srcs) == 0 {
		return leakResult{skipped: true, detail: "not evaluated: the target has no metrics endpoint"}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	st := leakState{srcs: srcs, gauges: make([]map[string]float64, len(srcs)), errs: make([]error, len(srcs))}
	for {
		vals, errs := s.scrapeAll(ctx, srcs)
		st.update(vals, errs)
		res := st.judge(time.Since(start))
		if res.passed {
			return res
		}
		select {
		case <-ctx.Done():
			return res
		case <-time.After(poll):
		}
	}
}

// leakState is what the leak check knows about each source: its leak gauges in its
// latest answer (nil: never answered) and the error of its latest scrape.
type leakState struct {
	srcs   []target.Source
	gauges []map[string]float64
	errs   []error
}

// LeakVerdict is the leak check's judgement of what the sources said last (see JudgeLeaks).
type LeakVerdict struct {
	// Passed: every source answered and every leak gauge read 0. Evaluated is false when
	// the check could not tell (Passed then means nothing).
	Passed, Evaluated bool
	// Residual holds "process/gauge" -> value of the gauges above 0 (failed checks only).
	Residual map[string]float64
	Detail   string
}

// JudgeLeaks judges one round of the leak check exactly as the runner does: for each
// process, its latest metrics (nil: it never answered) and the error of its latest
// scrape (nil: it answered). waited is how long the check has polled. The simulator
// judges its virtual gauges with it.
func JudgeLeaks(processes []string, latest []map[string]float64, errs []error, waited time.Duration) LeakVerdict {
	st := leakState{gauges: make([]map[string]float64, len(processes)), errs: make([]error, len(processes))}
	for _, p := range processes {
		st.srcs = append(st.srcs, target.Source{Process: p})
	}
	st.update(latest, errs)
	for i := range processes {
		if errs[i] != nil && latest[i] != nil {
			// It answered once and not this time: keep its last answer, as the runner does.
			st.gauges[i] = filterLeak(latest[i])
		}
	}
	r := st.judge(waited)
	return LeakVerdict{Passed: r.passed, Evaluated: !r.skipped, Residual: r.residual, Detail: r.detail}
}

func filterLeak(v map[string]float64) map[string]float64 {
	g := map[string]float64{}
	for name, x := range v {
		if IsLeakGauge(name) {
			g[name] = x
		}
	}
	return g
}

func (st *leakState) update(vals []map[string]float64, errs []error) {
	for i := range st.srcs {
		st.errs[i] = errs[i]
		if errs[i] != nil {
			continue
		}
		g := map[string]float64{}
		for name, x := range vals[i] {
			if IsLeakGauge(name) {
				g[name] = x
			}
		}
		st.gauges[i] = g
	}
}

func (st *leakState) judge(waited time.Duration) leakResult {
	res := leakResult{residual: map[string]float64{}, waited: waited}
	var unknown []string
	seen := 0
	for i, src := range st.srcs {
		switch {
		case st.gauges[i] == nil:
			unknown = append(unknown, fmt.Sprintf("%s never answered (%v)", src.Process, st.errs[i]))
		case st.errs[i] != nil:
			unknown = append(unknown, fmt.Sprintf("%s stopped answering (%v)", src.Process, st.errs[i]))
		}
		for name, x := range st.gauges[i] {
			seen++
			if x != 0 {
				res.residual[src.Process+"/"+name] = x
			}
		}
	}
	if seen == 0 && len(unknown) == 0 {
		unknown = append(unknown, "no running/queued gauge (sglang:* or vllm:*) found in any scrape")
	}
	w := waited.Round(time.Millisecond)
	switch {
	case len(res.residual) > 0:
		keys := make([]string, 0, len(res.residual))
		for k := range res.residual {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		problems := make([]string, 0, len(keys)+len(unknown))
		for _, k := range keys {
			problems = append(problems, fmt.Sprintf("%s = %g", k, res.residual[k]))
		}
		res.detail = fmt.Sprintf("not drained after %v: %s", w, strings.Join(append(problems, unknown...), "; "))
	case len(unknown) > 0:
		res.skipped = true
		res.residual = nil
		res.detail = fmt.Sprintf("not evaluated: after %v, %s", w, strings.Join(unknown, "; "))
	default:
		res.passed = true
		res.residual = nil
		res.detail = fmt.Sprintf("running and queued gauges at 0 after %v (%d gauges on %d endpoints)", w, seen, len(st.srcs))
	}
	return res
}
