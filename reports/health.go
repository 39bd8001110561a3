package reports

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"pdsoak/assertion"
	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// The truthful_health assertion: the entry process's /health (ledger health events)
// judged against what the requests sent to it experienced. A window in which every
// probe answered 200 while every request sent in it failed (a 5xx, a connection error,
// or no first token before its deadline) is a health_lies finding.
const (
	// AssertTruthfulHealth fails on any health_lies finding.
	AssertTruthfulHealth = assertion.AssertTruthfulHealth
	// HealthWindow is the width of the windows health is judged in.
	HealthWindow = 2 * time.Second
	// healthMinRequests: a window judges health only when at least this many requests
	// were sent in it (one failed request proves nothing about the server).
	healthMinRequests = 3
)

// HealthLie is one health_lies finding: consecutive windows in which Source's health
// probe answered 200 every time while every request sent then failed.
type HealthLie struct {
	Source string `json:"source"`
	URL    string `json:"url,omitempty"`
	// Start and End are seconds since the start of the run.
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Probes answered 200; Requests were sent in the windows and all failed.
	Probes   int    `json:"probes"`
	Requests int    `json:"requests"`
	Detail   string `json:"detail"`
}

type healthProbe struct {
	at     time.Time
	status int
}

type healthReq struct {
	at     time.Time
	failed bool
	// refused: an explicit 503 refusal (ledger.OutcomeRejected), a failure only in a
	// window in which no request got a token: overload shed at admission (I2) while the
	// admitted requests stream is the server working, and /health's 200 the truth.
	refused bool
	why     string
}

// tokenSpan is when a request received tokens: its first to its last.
type tokenSpan struct{ from, to time.Time }

// healthAcc collects health probes and every request's fate by its scheduled time.
type healthAcc struct {
	probes map[string][]healthProbe
	urls   map[string]string
	reqs   []healthReq
	tokens []tokenSpan
}

func (h *healthAcc) probe(e ledger.Event) {
	if h.probes == nil {
		h.probes, h.urls = map[string][]healthProbe{}, map[string]string{}
	}
	h.probes[e.Source] = append(h.probes[e.Source], healthProbe{at: e.Time, status: e.Status})
	if e.URL != "" {
		h.urls[e.Source] = e.URL
	}
}

func (h *healthAcc) request(e ledger.Event, o ledger.Outcome, scheduled time.Time) {
	why := ""
	switch {
	case e.Status >= 500:
		why = fmt.Sprintf("HTTP %d", e.Status)
	case o == ledger.OutcomeTransportError || o == ledger.OutcomeConnectionLost:
		why = string(o)
	case o.SilentDrop() && e.TTFT == 0:
		why = "no first token"
	}
	h.reqs = append(h.reqs, healthReq{at: scheduled, failed: why != "", refused: why != "" && o == ledger.OutcomeRejected, why: why})
	// Tokens: from the first to the last (first + the inter-token gaps; an ok answer's
	// end), so a stream that stalled counts only up to its last token.
	sent := e.Time.Add(-secs(e.E2E))
	switch {
	case e.TTFT > 0:
		first, last := sent.Add(secs(e.TTFT)), e.Time
		if o != ledger.OutcomeOK {
			var gaps float64
			for _, g := range e.ITL {
				gaps += g
			}
			last = first.Add(secs(gaps))
		}
		h.tokens = append(h.tokens, tokenSpan{first, last})
	case o == ledger.OutcomeOK:
		h.tokens = append(h.tokens, tokenSpan{e.Time, e.Time})
	}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// lies finds the health_lies windows of every probed source.
func (h *healthAcc) lies(start time.Time) []HealthLie {
	if len(h.probes) == 0 {
		return nil
	}
	w := HealthWindow.Seconds()
	idx := func(t time.Time) int { return int(math.Floor(t.Sub(start).Seconds() / w)) }
	type win struct {
		reqs, failed int
		why          map[string]int
	}
	// Windows in which some request got a token (a difference array over the span of
	// the requests' windows).
	lo, hi := math.MaxInt, math.MinInt
	for _, r := range h.reqs {
		lo, hi = min(lo, idx(r.at)), max(hi, idx(r.at))
	}
	progress := func(int) bool { return false }
	if hi >= lo && hi-lo < 1<<22 {
		diff := make([]int, hi-lo+2)
		for _, s := range h.tokens {
			a, b := max(idx(s.from), lo), min(idx(s.to), hi)
			if a <= b {
				diff[a-lo]++
				diff[b-lo+1]--
			}
		}
		for i := 1; i < len(diff); i++ {
			diff[i] += diff[i-1]
		}
		progress = func(i int) bool { return i >= lo && i <= hi && diff[i-lo] > 0 }
	}
	wins := map[int]*win{}
	for _, r := range h.reqs {
		i := idx(r.at)
		if wins[i] == nil {
			wins[i] = &win{why: map[string]int{}}
		}
		wins[i].reqs++
		if r.failed && (!r.refused || !progress(i)) {
			wins[i].failed++
			wins[i].why[r.why]++
		}
	}
	var out []HealthLie
	sources := make([]string, 0, len(h.probes))
	for s := range h.probes {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	for _, src := range sources {
		ok, bad := map[int]int{}, map[int]bool{}
		for _, p := range h.probes[src] {
			if p.status == 200 {
				ok[idx(p.at)]++
			} else {
				bad[idx(p.at)] = true
			}
		}
		keys := make([]int, 0, len(ok))
		for i := range ok {
			keys = append(keys, i)
		}
		sort.Ints(keys)
		var cur *HealthLie
		why := map[string]int{}
		flush := func() {
			if cur == nil {
				return
			}
			cur.Detail = fmt.Sprintf("%s answered 200 to %d health probes from %gs to %gs while all %d requests sent then failed (%s)",
				src, cur.Probes, cur.Start, cur.End, cur.Requests, whyList(why))
			out = append(out, *cur)
			cur, why = nil, map[string]int{}
		}
		for _, i := range keys {
			wn := wins[i]
			lying := !bad[i] && wn != nil && wn.reqs >= healthMinRequests && wn.failed == wn.reqs
			if !lying {
				flush()
				continue
			}
			if cur != nil && cur.End != round(float64(i)*w) {
				flush()
			}
			if cur == nil {
				cur = &HealthLie{Source: src, URL: h.urls[src], Start: round(float64(i) * w)}
			}
			cur.End = round(float64(i+1) * w)
			cur.Probes += ok[i]
			cur.Requests += wn.reqs
			for k, v := range wn.why {
				why[k] += v
			}
		}
		flush()
	}
	return out
}

func whyList(m map[string]int) string {
	keys := format.SortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

// truthfulHealthVerdict judges truthful_health from the findings.
func (b *Builder) truthfulHealthVerdict(r *Results) (State, string) {
	if len(b.pd.health.probes) == 0 {
		return StateNotEvaluated, "no health probe in the ledger (the harness probes the entry process's /health during the run)"
	}
	if len(r.HealthLies) == 0 {
		n := 0
		for _, ps := range b.pd.health.probes {
			n += len(ps)
		}
		return StatePass, fmt.Sprintf("health agreed with the requests in every window (%d probes)", n)
	}
	parts := make([]string, len(r.HealthLies))
	for i, l := range r.HealthLies {
		parts[i] = l.Detail
	}
	return StateFail, format.Plural(len(r.HealthLies), "health_lies finding") + ": " + strings.Join(parts, "; ")
}
