package reports

import (
	"math"
	"sort"
	"strconv"
	"time"

	"pdsoak/internal/nearest"
	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// Timeline is the figures behind report.html's charts, computed from the ledger alone.
// Every X is seconds since load start (the first scheduled request, or run_start when
// none was scheduled). Renderers draw it (see Charts and RenderSVG); they never read the
// ledger.
type Timeline struct {
	// Start is load start; Duration the seconds from it to the last event.
	Start    time.Time `json:"start"`
	Duration float64   `json:"duration"`
	// Window is the width in seconds of the bins behind Completed, latencies and
	// InFlight: 1 s, or wider so that a long run has at most MaxWindows bins.
	Window float64 `json:"window"`
	// Completed has one series per outcome seen: requests completed per second, by the
	// window in which their done event fell (stacked in the chart).
	Completed []Series `json:"completed"`
	// TTFT, ITL and E2E have p50, p90 and p99 per window of scheduled time (seconds).
	TTFT []Series `json:"ttft"`
	ITL  []Series `json:"itl"`
	E2E  []Series `json:"e2e"`
	// InFlight is the most requests scheduled and not yet done at any moment of each window.
	InFlight Series `json:"in_flight"`
	// Gauges are the server gauges scraped during the run (sample events), one group per
	// gauge with one series per process, downsampled with LTTB.
	Gauges []GaugeGroup `json:"gauges,omitempty"`
	// GPUUtil and GPUMem are per-device utilisation and memory used (percent), when GPU
	// samples exist.
	GPUUtil []Series `json:"gpu_util,omitempty"`
	GPUMem  []Series `json:"gpu_mem,omitempty"`
	// Faults are the fault windows with their recovery points; Drops every silent drop at
	// the time it was scheduled. Neither is ever downsampled.
	Faults []FaultSpan `json:"faults"`
	Drops  []DropMark  `json:"drops"`
	// PDShare is pd_path's share of ok requests through a prefill worker per window,
	// in percent; PDBelow the windows that fell short (pdpath.go). Absent without
	// prefill counters.
	PDShare *Series `json:"pd_share,omitempty"`
	PDBelow []Span  `json:"pd_below,omitempty"`
	// Unexplained are the scheduled times of the errors nothing explains (seconds).
	Unexplained []float64 `json:"unexplained,omitempty"`
}

// Series is one named line.
type Series struct {
	Name   string  `json:"name"`
	Points []Point `json:"points"`
}

// GaugeGroup is one server gauge across processes.
type GaugeGroup struct {
	Metric string   `json:"metric"`
	Series []Series `json:"series"`
	// Note says where the gauge disagreed with /debug/requests (see gaugeNote).
	Note string `json:"note,omitempty"`
}

// FaultSpan is one fault window. Stop is nil when the fault was never reverted during the
// ledger; RecoveredAt is the start of the first window whose success rate reached the
// threshold (FaultResult.TimeToRecover after Stop), nil when it did not recover.
type FaultSpan struct {
	Name        string   `json:"name"`
	Type        string   `json:"type,omitempty"`
	Target      string   `json:"target,omitempty"`
	Start       float64  `json:"start"`
	Stop        *float64 `json:"stop,omitempty"`
	Recovered   *bool    `json:"recovered,omitempty"`
	RecoveredAt *float64 `json:"recovered_at,omitempty"`
}

// DropMark is one silent drop at the time it was scheduled.
type DropMark struct {
	At        float64        `json:"at"`
	RequestID string         `json:"request_id"`
	Outcome   ledger.Outcome `json:"outcome"`
	Phase     ledger.Phase   `json:"phase,omitempty"`
}

// Timeline bounds.
const (
	// MaxWindows bounds the bins of the binned series.
	MaxWindows = 600
	// MaxSeriesPoints bounds each sampled series (gauges, GPU) after LTTB.
	MaxSeriesPoints = 1000
)

// windowSteps are the bin widths a timeline may use, in seconds.
var windowSteps = []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400}

// timelineAcc gathers what the timeline needs as the ledger streams: compact per-request
// records and the raw samples. Times are Unix nanoseconds.
type timelineAcc struct {
	firstSched int64
	starts     []int64 // scheduled
	ends       []int64 // done
	reqs       []reqRec
	itl        []float32
	gauges     map[string]map[string][]rawPoint // metric -> source -> samples
	gpuUtil    map[int][]rawPoint
	gpuMem     map[int][]rawPoint
	drops      []dropRec
}

type reqRec struct {
	done, sched int64
	outcome     uint8
	ttft, e2e   float32
	itlFrom     int32
	itlN        int32
}

type rawPoint struct {
	at int64
	v  float64
}

type dropRec struct {
	at      int64
	id      string
	outcome ledger.Outcome
	phase   ledger.Phase
}

var outcomeIndex = func() map[ledger.Outcome]uint8 {
	m := map[ledger.Outcome]uint8{}
	for i, o := range ledger.Outcomes {
		m[o] = uint8(i)
	}
	return m
}()

func (t *timelineAcc) scheduled(e ledger.Event) {
	if e.Time.IsZero() {
		return
	}
	at := e.Time.UnixNano()
	if t.firstSched == 0 || at < t.firstSched {
		t.firstSched = at
	}
	t.starts = append(t.starts, at)
}

func (t *timelineAcc) done(e ledger.Event, o ledger.Outcome, sched time.Time) {
	if e.Time.IsZero() {
		return
	}
	r := reqRec{done: e.Time.UnixNano(), sched: sched.UnixNano(), outcome: outcomeIndex[o],
		ttft: float32(e.TTFT), e2e: float32(e.E2E), itlFrom: int32(len(t.itl)), itlN: int32(len(e.ITL))}
	for _, x := range e.ITL {
		t.itl = append(t.itl, float32(x))
	}
	t.reqs = append(t.reqs, r)
	t.ends = append(t.ends, r.done)
	if o.SilentDrop() {
		t.drops = append(t.drops, dropRec{at: r.sched, id: e.RequestID, outcome: o, phase: e.Phase})
	}
}

func (t *timelineAcc) sample(e ledger.Event) {
	if e.Time.IsZero() {
		return
	}
	at := e.Time.UnixNano()
	if e.Source == ledger.GPUSource || len(e.GPUs) > 0 {
		if t.gpuUtil == nil {
			t.gpuUtil, t.gpuMem = map[int][]rawPoint{}, map[int][]rawPoint{}
		}
		for _, g := range e.GPUs {
			if g.Util != nil {
				t.gpuUtil[g.Index] = append(t.gpuUtil[g.Index], rawPoint{at, *g.Util})
			}
			if g.MemUsed != nil && g.MemTotal != nil && *g.MemTotal > 0 {
				t.gpuMem[g.Index] = append(t.gpuMem[g.Index], rawPoint{at, 100 * float64(*g.MemUsed) / float64(*g.MemTotal)})
			}
		}
		return
	}
	src := e.Source
	if src == "" {
		src = "target"
	}
	for name, v := range e.Metrics {
		if t.gauges == nil {
			t.gauges = map[string]map[string][]rawPoint{}
		}
		if t.gauges[name] == nil {
			t.gauges[name] = map[string][]rawPoint{}
		}
		t.gauges[name][src] = append(t.gauges[name][src], rawPoint{at, v})
	}
}

// Timeline computes the figures behind the charts. r is b.Results() (for the faults'
// recovery); it may be called more than once.
func (b *Builder) Timeline(r *Results) *Timeline {
	t := &b.tl
	origin := b.start
	if t.firstSched != 0 {
		origin = time.Unix(0, t.firstSched).UTC()
	}
	tl := &Timeline{Start: origin, Completed: []Series{}, Faults: []FaultSpan{}, Drops: []DropMark{}}
	if origin.IsZero() {
		return tl
	}
	tl.Unexplained = b.explain.marks(origin)
	o := origin.UnixNano()
	sec := func(at int64) float64 { return float64(at-o) / 1e9 }
	if !b.end.IsZero() {
		tl.Duration = round(max(0, sec(b.end.UnixNano())))
	}
	w := windowSteps[len(windowSteps)-1]
	for _, s := range windowSteps {
		if tl.Duration/s <= MaxWindows {
			w = s
			break
		}
	}
	tl.Window = w
	nbins := int(math.Floor(tl.Duration/w)) + 1
	bin := func(at int64) int { return max(0, min(nbins-1, int(math.Floor(sec(at)/w)))) }
	mid := func(i int) float64 { return round(float64(i)*w + w/2) }

	// Completed per second by outcome, binned by done time.
	counts := make([][]int, len(ledger.Outcomes))
	for _, q := range t.reqs {
		if counts[q.outcome] == nil {
			counts[q.outcome] = make([]int, nbins)
		}
		counts[q.outcome][bin(q.done)]++
	}
	for i, oc := range ledger.Outcomes {
		if counts[i] == nil {
			continue
		}
		s := Series{Name: string(oc), Points: make([]Point, nbins)}
		for j, n := range counts[i] {
			s.Points[j] = Point{mid(j), float64(n) / w}
		}
		tl.Completed = append(tl.Completed, s)
	}

	// Latency percentiles per window of scheduled time.
	ttft, itl, e2e := make([][]float64, nbins), make([][]float64, nbins), make([][]float64, nbins)
	for _, q := range t.reqs {
		j := bin(q.sched)
		if q.ttft > 0 {
			ttft[j] = append(ttft[j], float64(q.ttft))
		}
		if q.outcome == outcomeIndex[ledger.OutcomeOK] || q.e2e > 0 {
			e2e[j] = append(e2e[j], float64(q.e2e))
		}
		for _, x := range t.itl[q.itlFrom : q.itlFrom+q.itlN] {
			itl[j] = append(itl[j], float64(x))
		}
	}
	tl.TTFT, tl.ITL, tl.E2E = windowPercentiles(ttft, mid), windowPercentiles(itl, mid), windowPercentiles(e2e, mid)

	tl.InFlight = Series{Name: "in flight", Points: inFlight(t.starts, t.ends, nbins, bin, mid)}

	// Fault boundaries are forced into every downsampled series.
	var bounds []int64
	for _, f := range b.faults {
		for _, at := range []time.Time{f.start, f.stop} {
			if !at.IsZero() {
				bounds = append(bounds, at.UnixNano())
			}
		}
	}
	sampled := func(name string, raw []rawPoint) Series {
		sort.SliceStable(raw, func(i, j int) bool { return raw[i].at < raw[j].at })
		pts := make([]Point, len(raw))
		for i, p := range raw {
			pts[i] = Point{round(sec(p.at)), p.v}
		}
		var forced []int
		for _, at := range bounds {
			if i := sort.Search(len(raw), func(i int) bool { return raw[i].at >= at }); i < len(raw) {
				forced = append(forced, i)
			}
		}
		return Series{Name: name, Points: LTTB(pts, MaxSeriesPoints, forced)}
	}
	for _, metric := range format.SortedKeys(t.gauges) {
		g := GaugeGroup{Metric: metric}
		for _, src := range format.SortedKeys(t.gauges[metric]) {
			g.Series = append(g.Series, sampled(src, t.gauges[metric][src]))
		}
		g.Note = gaugeNote(metric, t.gauges[metric], b.explain.diag.seen)
		tl.Gauges = append(tl.Gauges, g)
	}
	for _, dev := range sortedInts(t.gpuUtil) {
		tl.GPUUtil = append(tl.GPUUtil, sampled(gpuName(dev), t.gpuUtil[dev]))
	}
	for _, dev := range sortedInts(t.gpuMem) {
		tl.GPUMem = append(tl.GPUMem, sampled(gpuName(dev), t.gpuMem[dev]))
	}

	for i, f := range b.faults {
		span := FaultSpan{Name: f.res.Name, Type: f.res.Type, Target: f.res.Target}
		if !f.start.IsZero() {
			span.Start = round(sec(f.start.UnixNano()))
		}
		if !f.stop.IsZero() {
			span.Stop = Float(round(sec(f.stop.UnixNano())))
		}
		if r != nil && i < len(r.Faults) && r.Faults[i].Name == f.res.Name {
			span.Recovered = r.Faults[i].Recovered
			if ttr := r.Faults[i].TimeToRecover; ttr != nil && span.Stop != nil {
				span.RecoveredAt = Float(round(*span.Stop + *ttr))
			}
		}
		tl.Faults = append(tl.Faults, span)
	}
	for _, d := range t.drops {
		tl.Drops = append(tl.Drops, DropMark{At: round(sec(d.at)), RequestID: d.id, Outcome: d.outcome, Phase: d.phase})
	}
	sort.SliceStable(tl.Drops, func(i, j int) bool { return tl.Drops[i].At < tl.Drops[j].At })
	tl.PDShare, tl.PDBelow = pdTimeline(r) // pdreport.go
	return tl
}

func gpuName(dev int) string { return "gpu " + strconv.Itoa(dev) }

// windowPercentiles gives p50, p90 and p99 series over per-window samples; a window with
// no sample has no point (the line breaks there rather than fall to zero).
func windowPercentiles(bins [][]float64, mid func(int) float64) []Series {
	qs := []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}}
	out := make([]Series, len(qs))
	for k, q := range qs {
		out[k] = Series{Name: q.name, Points: []Point{}}
	}
	for j, xs := range bins {
		if len(xs) == 0 {
			continue
		}
		sort.Float64s(xs)
		for k, q := range qs {
			out[k].Points = append(out[k].Points, Point{mid(j), round(nearest.Rank(xs, q.q))})
		}
	}
	return out
}

// inFlight sweeps scheduled (+1) and done (-1) times and keeps each window's maximum.
func inFlight(starts, ends []int64, nbins int, bin func(int64) int, mid func(int) float64) []Point {
	s := append([]int64(nil), starts...)
	e := append([]int64(nil), ends...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	sort.Slice(e, func(i, j int) bool { return e[i] < e[j] })
	peak := make([]int, nbins)
	cur, i, j := 0, 0, 0
	for i < len(s) || j < len(e) {
		var at int64
		// Ends first at equal times: a request that finished as another was scheduled
		// did not overlap it.
		if j < len(e) && (i >= len(s) || e[j] <= s[i]) {
			at = e[j]
			cur--
			j++
		} else {
			at = s[i]
			cur++
			i++
		}
		b := bin(at)
		peak[b] = max(peak[b], cur)
	}
	// A window with no event holds the level carried into it.
	pts := make([]Point, nbins)
	level, i, j := 0, 0, 0
	for k := range nbins {
		pts[k] = Point{mid(k), float64(max(peak[k], level))}
		for i < len(s) && bin(s[i]) <= k {
			level++
			i++
		}
		for j < len(e) && bin(e[j]) <= k {
			level--
			j++
		}
		level = max(level, 0)
	}
	return pts
}

func sortedInts[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
