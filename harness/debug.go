package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"pdsoak/harness/judge"
	"pdsoak/harness/target"
)

// debugCacheTTL lets simultaneous drops share one snapshot.
const debugCacheTTL = 300 * time.Millisecond

// debugWarnEvery spaces out the log lines about failed /debug/requests fetches: a
// server in trouble fails every probe, and each drop's ledger event says so anyway.
const debugWarnEvery = 30 * time.Second

// debugProbe fetches /debug/requests from every source, sharing snapshots taken
// within debugCacheTTL between requests that drop at the same moment.
type debugProbe struct {
	hc      *http.Client
	sources []target.Source
	timeout time.Duration // one snapshot, all sources in parallel
	log     *slog.Logger
	warn    rate.Sometimes
	sf      singleflight.Group
	mu      sync.Mutex
	at      time.Time
	snap    []snapshot
}

type snapshot struct {
	src     target.Source
	entries []json.RawMessage
	err     error
}

func newDebugProbe(hc *http.Client, sources []target.Source, timeout time.Duration, log *slog.Logger) *debugProbe {
	return &debugProbe{hc: hc, sources: sources, timeout: timeout, log: log,
		warn: rate.Sometimes{First: 1, Interval: debugWarnEvery}}
}

func (p *debugProbe) enabled() bool { return p != nil && len(p.sources) > 0 }

// Inspect returns what the sources say about request id, as JSON.
func (p *debugProbe) Inspect(ctx context.Context, id string) json.RawMessage {
	if !p.enabled() {
		return nil
	}
	snaps := p.snapshot(ctx)
	srcs := make([]judge.DebugSource, len(snaps))
	for i, s := range snaps {
		srcs[i] = judge.DebugSource{Process: s.src.Process, URL: s.src.URL, Entries: s.entries, Err: s.err}
	}
	return judge.DebugReportFor(id, srcs)
}

func (p *debugProbe) snapshot(ctx context.Context) []snapshot {
	p.mu.Lock()
	if time.Since(p.at) < debugCacheTTL && p.snap != nil {
		s := p.snap
		p.mu.Unlock()
		return s
	}
	p.mu.Unlock()
	v, _, _ := p.sf.Do("snap", func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
		defer cancel()
		out := make([]snapshot, len(p.sources))
		var wg sync.WaitGroup
		for i, src := range p.sources {
			wg.Add(1)
			go func() {
				defer wg.Done()
				entries, err := fetchDebug(ctx, p.hc, src.URL)
				if err != nil {
					p.warn.Do(func() { p.log.Warn("debug probe failed", "process", src.Process, "err", err) })
				}
				out[i] = snapshot{src: src, entries: entries, err: err}
			}()
		}
		wg.Wait()
		p.mu.Lock()
		p.at, p.snap = time.Now(), out
		p.mu.Unlock()
		return out, nil
	})
	return v.([]snapshot)
}

// fetchDebug GETs a /debug/requests endpoint and returns its entries. It accepts a
// JSON array of objects, or an object holding such an array under "requests" (or
// any single array-valued field).
func fetchDebug(ctx context.Context, hc *http.Client, url string) ([]json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("harness: debug request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("harness: debug fetch: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("harness: debug read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("harness: debug status %d", resp.StatusCode)
	}
	return judge.ParseDebugRequests(body)
}
