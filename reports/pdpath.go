package reports

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"pdsoak/assertion"
	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// The pd_path assertion: of the requests completed ok, the share that went through a
// prefill worker, measured from each prefill process's own counter (ledger pd_counter
// events) rather than from anything the client sees. A PD proxy that silently falls
// back to decode-only keeps every client request ok; only this share falls.
const (
	// AssertPDPath is "pd_path" or "pd_path(MIN_SHARE)" (grammar: package assertion).
	AssertPDPath = assertion.AssertPDPath
	// DefaultPDMinShare is pd_path's minimum share without an argument.
	DefaultPDMinShare = assertion.DefaultPDMinShare
	// PDWindow is the width of pd_path's windows (at least two counter scrapes each).
	PDWindow = 2 * time.Second
	// pdMinWindowOK: a window with fewer ok requests is shown but never named as the
	// one where disaggregation stopped (too few to tell).
	pdMinWindowOK = 3
)

// PDPathResult is results.json's pd_path: the share overall and per window.
type PDPathResult struct {
	// Share is prefills / ok requests over the run, capped at 1 (a prefill whose
	// request then failed elsewhere counts too); nil when no request completed ok.
	Share *float64 `json:"share,omitempty"`
	// OK is the requests completed ok and judged; Prefills the rise of every prefill
	// counter.
	OK       int     `json:"ok"`
	Prefills float64 `json:"prefills"`
	// Unjudged are ok requests sent before some prefill process went dark (the reading
	// that failed: it died or became unreachable then) whose first token came after its
	// last good reading: their prefills may be among those never read.
	Unjudged int `json:"unjudged,omitempty"`
	// Processes are the prefill counters scraped, one per process.
	Processes []PDProcess `json:"processes"`
	// Windows are PDWindow wide, from load start (the report's time axis), by the time
	// each ok request got its first token (when prefill's KV arrived).
	Windows []PDWindowShare `json:"windows,omitempty"`
	// StoppedAt is the start (seconds) of the first window with at least 3 ok requests
	// whose prefills fell short of the minimum share (of the pd_path assertion, or 0.99)
	// by more than one request.
	StoppedAt *float64 `json:"stopped_at,omitempty"`
	// MinShare is the minimum the windows were judged against.
	MinShare float64 `json:"min_share"`
}

// PDProcess is one prefill process's counter over the run.
type PDProcess struct {
	Process  string  `json:"process"`
	Counter  string  `json:"counter"`
	Rise     float64 `json:"rise"`
	Scrapes  int     `json:"scrapes"`
	Failed   int     `json:"failed,omitempty"`
	LastErr  string  `json:"last_error,omitempty"`
	Restarts int     `json:"restarts,omitempty"` // the counter went down (the process restarted)
}

// PDWindowShare is one window of the prefill share.
type PDWindowShare struct {
	Start    float64  `json:"start"`
	End      float64  `json:"end"`
	OK       int      `json:"ok"`
	Prefills float64  `json:"prefills"`
	Share    *float64 `json:"share,omitempty"`
	// Below: the prefills fell short of the minimum share by more than one request.
	Below bool `json:"below,omitempty"`
}

// pdScrape is one pd_counter event of a process.
type pdScrape struct {
	at     time.Time
	v      float64
	ok     bool
	absent bool // the process answered without the series (ledger.PDCounterAbsent)
	err    string
}

// pdAcc accumulates pd_counter events and ok requests' first-token times.
type pdAcc struct {
	procs   map[string][]pdScrape
	counter map[string]string
	okAt    []okSpan
	health  healthAcc // health.go
}

func (p *pdAcc) add(e ledger.Event) {
	switch e.Type {
	case ledger.EventPDCounter:
		if p.procs == nil {
			p.procs, p.counter = map[string][]pdScrape{}, map[string]string{}
		}
		sc := pdScrape{at: e.Time, err: e.Error, absent: e.Error != "" && e.Cause == ledger.PDCounterAbsent}
		for name, v := range e.Metrics { // one selector per process
			sc.v, sc.ok, p.counter[e.Source] = v, e.Error == "", name
		}
		if e.Error != "" && p.counter[e.Source] == "" && e.Detail != "" {
			p.counter[e.Source] = e.Detail
		}
		p.procs[e.Source] = append(p.procs[e.Source], sc)
	case ledger.EventHealth:
		p.health.probe(e)
	}
}

// okSpan is an ok request's scheduled time and first-token time.
type okSpan struct{ sched, first time.Time }

// done notes a terminal request: ok ones by first-token time (pd_path), all of them
// by scheduled time (truthful_health).
func (p *pdAcc) done(e ledger.Event, o ledger.Outcome, scheduled time.Time) {
	if o == ledger.OutcomeOK {
		at := e.Time
		if e.TTFT > 0 && e.E2E > 0 {
			at = e.Time.Add(-time.Duration((e.E2E - e.TTFT) * float64(time.Second)))
		}
		p.okAt = append(p.okAt, okSpan{sched: scheduled, first: at})
	}
	p.health.request(e, o, scheduled)
}

// result computes pd_path's figures; nil when the ledger has no pd_counter event.
func (p *pdAcc) result(start time.Time, minShare float64) *PDPathResult {
	if len(p.procs) == 0 {
		return nil
	}
	r := &PDPathResult{MinShare: minShare, Processes: []PDProcess{}}
	names := make([]string, 0, len(p.procs))
	for n := range p.procs {
		names = append(names, n)
	}
	sort.Strings(names)
	type span struct {
		from, to time.Time
		rise     float64
	}
	var spans, dark []span
	last := start
	for _, n := range names {
		scr := p.procs[n]
		sort.SliceStable(scr, func(i, j int) bool { return scr[i].at.Before(scr[j].at) })
		// A labelled counter has no series until its first increment: the readings
		// that found none before the first that found one read 0 (a process that
		// never shows the series stays unread: a typo is not a share of 0). One that
		// vanishes later is a failed reading (a restart, judged as any).
		if first := slices.IndexFunc(scr, func(s pdScrape) bool { return s.ok }); first > 0 {
			for j := range scr[:first] {
				if scr[j].absent {
					scr[j].ok, scr[j].v = true, 0
				}
			}
		}
		pp := PDProcess{Process: n, Counter: p.counter[n]}
		var prev, before *pdScrape // the last good reading and the one before it
		for i := range scr {
			s := &scr[i]
			if s.at.After(last) {
				last = s.at
			}
			if !s.ok {
				pp.Failed++
				pp.LastErr = s.err
				if prev != nil && (i == 0 || scr[i-1].ok) {
					from := prev.at
					if before != nil {
						from = before.at
					}
					dark = append(dark, span{from: from, to: s.at})
				}
				continue
			}
			pp.Scrapes++
			if prev != nil {
				rise := s.v - prev.v
				if rise < 0 { // a restarted process counts from 0 again
					rise = s.v
					pp.Restarts++
				}
				pp.Rise += rise
				spans = append(spans, span{prev.at, s.at, rise})
			}
			before, prev = prev, s
		}
		r.Prefills += pp.Rise
		r.Processes = append(r.Processes, pp)
	}
	// A request sent before a process went dark may have been prefilled there after its
	// last reading, and its first token can come long after (decode's queue); and one
	// whose first token came just before that reading may not be in it yet (prefill
	// counts a request when decode's acknowledgement reaches its loop, which a loaded
	// machine delays). One whose first token came after the reading before the last is
	// not judged against a counter that could never show its prefill.
	var okAt []time.Time
	for _, ok := range p.okAt {
		in := false
		for _, d := range dark {
			in = in || ok.first.After(d.from) && !ok.sched.After(d.to)
		}
		if in {
			r.Unjudged++
			continue
		}
		okAt = append(okAt, ok.first)
	}
	r.OK = len(okAt)
	if r.OK > 0 {
		r.Share = Float(round(math.Min(1, r.Prefills/float64(r.OK))))
	}
	// Windows: ok requests by first token, counter rises spread evenly over the span
	// between the two scrapes that saw them.
	n := int(math.Ceil(last.Sub(start).Seconds() / PDWindow.Seconds()))
	if n <= 0 || n > 100000 {
		return r
	}
	w := PDWindow.Seconds()
	oks := make([]int, n)
	pre := make([]float64, n)
	for _, at := range okAt {
		if i := int(at.Sub(start).Seconds() / w); i >= 0 && i < n {
			oks[i]++
		}
	}
	for _, s := range spans {
		a, b := s.from.Sub(start).Seconds(), s.to.Sub(start).Seconds()
		if b <= a {
			continue
		}
		for i := max(0, int(a/w)); i < n && float64(i)*w < b; i++ {
			lo, hi := math.Max(a, float64(i)*w), math.Min(b, float64(i+1)*w)
			if hi > lo {
				pre[i] += s.rise * (hi - lo) / (b - a)
			}
		}
	}
	for i := 0; i < n; i++ {
		ws := PDWindowShare{Start: round(float64(i) * w), End: round(float64(i+1) * w), OK: oks[i], Prefills: round(pre[i])}
		if oks[i] > 0 {
			ws.Share = Float(round(math.Min(1, pre[i]/float64(oks[i]))))
			// One request of slack: a rise is spread evenly between two readings, so a
			// window edge can cut a prefill from its request.
			ws.Below = pre[i] < minShare*float64(oks[i])-1
			if ws.Below && oks[i] >= pdMinWindowOK && r.StoppedAt == nil {
				r.StoppedAt = Float(ws.Start)
			}
		}
		r.Windows = append(r.Windows, ws)
	}
	return r
}

// pdPathVerdict judges pd_path(minShare).
func (b *Builder) pdPathVerdict(minShare float64, r *Results) (State, string) {
	pd := b.pd.result(b.pdOrigin(), minShare)
	if pd == nil {
		return StateNotEvaluated, "no prefill counter was scraped (target.pd_counters names none, or the target has no prefill process)"
	}
	for _, p := range pd.Processes {
		if p.Scrapes < 2 {
			return StateNotEvaluated, fmt.Sprintf("the prefill counter %s of %s was read %d times (need a reading at the start and one later): %s",
				format.FirstNonEmpty(p.Counter, "?"), p.Process, p.Scrapes, format.FirstNonEmpty(p.LastErr, "no reading"))
		}
	}
	if pd.Share == nil {
		return StateNotEvaluated, "no request completed ok, so no share of them can be judged"
	}
	detail := fmt.Sprintf("%s of %d ok requests went through a prefill worker (%g prefills counted by %s; minimum %s)",
		format.Pct(*pd.Share), pd.OK, pd.Prefills, pd.CounterNames(), format.Pct(minShare))
	if pd.Unjudged > 0 {
		detail += fmt.Sprintf("; %s not judged: their first token came within a reading of a prefill process going dark",
			format.Plural(pd.Unjudged, "ok request"))
	}
	if *pd.Share >= minShare {
		return StatePass, detail
	}
	if pd.StoppedAt != nil {
		detail += fmt.Sprintf("; disaggregation stopped in the window from %gs to %gs", *pd.StoppedAt, *pd.StoppedAt+PDWindow.Seconds())
	}
	return StateFail, detail + ": the other requests were served without a prefill worker (a decode-only fallback), though the client saw them ok"
}

// CounterNames lists the prefill processes and the counter read from each ("prefill-0
// pdsoak:prefills_completed_total, ...").
func (pd *PDPathResult) CounterNames() string {
	parts := make([]string, 0, len(pd.Processes))
	for _, p := range pd.Processes {
		parts = append(parts, p.Process+" "+p.Counter)
	}
	return strings.Join(parts, ", ")
}

// pdMinShare is the minimum share of the scenario's pd_path assertion (DefaultPDMinShare
// when it lists none), which results.json's windows are judged against.
func (b *Builder) pdMinShare() float64 {
	for _, a := range b.assertions() {
		if a.PDPath() {
			return a.Value
		}
	}
	return DefaultPDMinShare
}

// pdOrigin is load start (the first scheduled request), the report's time axis; the
// start of the ledger when nothing was scheduled.
func (b *Builder) pdOrigin() time.Time {
	if b.tl.firstSched != 0 {
		return time.Unix(0, b.tl.firstSched).UTC()
	}
	return b.start
}
