package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"pdsoak/harness/target"
)

// DebugReport is what the target's /debug/requests endpoints said about one request
// when the harness noticed it was silently dropped. It is stored as the done event's
// server_debug field.
type DebugReport struct {
	// Where summarises the findings, e.g. "decode-0: prealloc (age 12.3s)"; "not found"
	// when no process listed the request.
	Where   string           `json:"where"`
	Sources []DebugSourceHit `json:"sources"`
}

// DebugSourceHit is one process's answer.
type DebugSourceHit struct {
	Process string            `json:"process"`
	URL     string            `json:"url"`
	Found   bool              `json:"found"`
	Entries []json.RawMessage `json:"entries,omitempty"`
	Error   string            `json:"error,omitempty"`
}

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
	srcs := make([]DebugSource, len(snaps))
	for i, s := range snaps {
		srcs[i] = DebugSource{Process: s.src.Process, URL: s.src.URL, Entries: s.entries, Err: s.err}
	}
	return DebugReportFor(id, srcs)
}

// DebugSource is one process's /debug/requests answer: its entries, or the error that
// stood in for them.
type DebugSource struct {
	Process, URL string
	Entries      []json.RawMessage
	Err          error
}

// DebugReportFor builds the server_debug JSON of a silent drop of request id from the
// sources' answers, as the runner records it (the simulator uses it too).
func DebugReportFor(id string, srcs []DebugSource) json.RawMessage {
	rep := DebugReport{}
	var where []string
	for _, s := range srcs {
		hit := DebugSourceHit{Process: s.Process, URL: s.URL}
		if s.Err != nil {
			hit.Error = s.Err.Error()
		}
		for _, e := range s.Entries {
			if entryMatches(e, id) {
				hit.Found = true
				hit.Entries = append(hit.Entries, e)
				where = append(where, s.Process+": "+describeEntry(e))
			}
		}
		rep.Sources = append(rep.Sources, hit)
	}
	rep.Where = "not found"
	if len(where) > 0 {
		rep.Where = strings.Join(where, "; ")
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return nil
	}
	return b
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
	return ParseDebugRequests(body)
}

// ParseDebugRequests extracts the list of request entries from a /debug/requests body.
func ParseDebugRequests(body []byte) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	var arr []json.RawMessage
	if err := json.Unmarshal(body, &arr); err == nil {
		return arr, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("harness: debug body is neither a list nor an object: %w", err)
	}
	if v, ok := obj["requests"]; ok {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, nil
		}
		if err := json.Unmarshal(v, &arr); err != nil {
			return nil, fmt.Errorf("harness: debug requests field: %w", err)
		}
		return arr, nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if json.Unmarshal(obj[k], &arr) == nil {
			return arr, nil
		}
	}
	return nil, fmt.Errorf("harness: debug body has no request list")
}

// entryMatches reports whether a debug entry is about request id (the id the harness
// sent as X-Request-ID; servers may suffix it for their PD legs).
func entryMatches(e json.RawMessage, id string) bool {
	var m map[string]any
	if json.Unmarshal(e, &m) != nil {
		return false
	}
	for _, k := range []string{"id", "rid", "request_id", "x_request_id"} {
		if s, ok := m[k].(string); ok && (s == id || strings.HasPrefix(s, id+"-") || strings.HasPrefix(s, id+":")) {
			return true
		}
	}
	return false
}

func describeEntry(e json.RawMessage) string {
	var m struct {
		Stage    string   `json:"stage"`
		Age      *float64 `json:"age_seconds"`
		StageAge *float64 `json:"stage_age_seconds"`
	}
	_ = json.Unmarshal(e, &m)
	s := m.Stage
	if s == "" {
		s = "listed"
	}
	if m.StageAge != nil {
		s += fmt.Sprintf(" for %.1fs", *m.StageAge)
	}
	if m.Age != nil {
		s += fmt.Sprintf(" (age %.1fs)", *m.Age)
	}
	return s
}
