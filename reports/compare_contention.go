package reports

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// ContentionResult summarises the machine's contention over a run's windows
// (harness/contention samples): mean, p90 and max of each metric.
type ContentionResult struct {
	Windows int `json:"windows"`
	// Metrics maps a ledger.Contention* name to its figures over the windows.
	Metrics map[string]ContentionStat `json:"metrics"`
}

// ContentionStat is one contention metric over a run's windows.
type ContentionStat struct {
	Mean float64 `json:"mean"`
	P90  float64 `json:"p90"`
	Max  float64 `json:"max"`
}

// ContentionBounds say when a run was too contended to judge a server by. A metric
// above its bound makes compare's answer "inconclusive"; zero fields take the defaults.
type ContentionBounds struct {
	// CPUPressure bounds the mean share of the load's windows in which some runnable
	// task waited for a CPU (PSI "some"). The run's own server and harness contend too,
	// so the default leaves room: a smoke run against the reference server on a quiet
	// 2-core box stays well under it, one beside a compile or stress-ng goes far above.
	CPUPressure float64
	// Steal bounds the mean share of CPU time stolen by the hypervisor.
	Steal float64
	// TickLag bounds the p90 of the harness's own ticker lag (seconds).
	TickLag float64
	// SendLag bounds the p90 over the windows of each window's p99 send lag (seconds):
	// requests sent late because the harness could not keep up.
	SendLag float64
	// RunDelay bounds the mean over the windows of the harness threads' mean wait for a
	// CPU once runnable (seconds, ledger.ContentionRunDelay): each wake-up on a
	// request's path waits about that long, in the harness and in a target on the same
	// machine, so a machine that delays every wake-up moves every percentile.
	RunDelay float64
}

// Default contention bounds (see ContentionBounds). The run delay's: a request's path
// has about ten wake-ups in the harness and a target on the same machine, so 100 µs each
// adds about 1 ms, half of TTFT's absolute floor (2 ms). Measured on a 2-core machine: 18
// to 33 µs quiet, 53 to 58 under stress-ng --cpu 2, 129 to 425 beside it and race-built
// tests, where the same server's TTFT p50 moved 5.4% with CPU pressure under its bound.
const (
	DefaultBoundCPUPressure = 0.40
	DefaultBoundSteal       = 0.05
	DefaultBoundTickLag     = 0.050
	DefaultBoundSendLag     = 0.100
	DefaultBoundRunDelay    = 0.0001
)

func (b *ContentionBounds) defaults() {
	if b.CPUPressure <= 0 {
		b.CPUPressure = DefaultBoundCPUPressure
	}
	if b.Steal <= 0 {
		b.Steal = DefaultBoundSteal
	}
	if b.TickLag <= 0 {
		b.TickLag = DefaultBoundTickLag
	}
	if b.SendLag <= 0 {
		b.SendLag = DefaultBoundSendLag
	}
	if b.RunDelay <= 0 {
		b.RunDelay = DefaultBoundRunDelay
	}
}

// Exceeded lists, in words, each bound the run's contention went over ("" none).
func (c *ContentionResult) Exceeded(b ContentionBounds) []string {
	if c == nil || c.Windows == 0 {
		return nil
	}
	b.defaults()
	var out []string
	check := func(metric, what string, v, bound float64, pct bool) {
		if v <= bound {
			return
		}
		if pct {
			out = append(out, fmt.Sprintf("%s %.0f%% (bound %.0f%%)", what, 100*v, 100*bound))
		} else if bound < 0.01 {
			out = append(out, fmt.Sprintf("%s %s (bound %s)", what, format.SecondsMicro(v), format.SecondsMicro(bound)))
		} else {
			out = append(out, fmt.Sprintf("%s %s (bound %s)", what, format.Seconds(v), format.Seconds(bound)))
		}
	}
	if s, ok := c.Metrics[ledger.ContentionCPUPressure]; ok {
		check(ledger.ContentionCPUPressure, "CPU pressure (mean share of time a task waited for a CPU)", s.Mean, b.CPUPressure, true)
	}
	if s, ok := c.Metrics[ledger.ContentionSteal]; ok {
		check(ledger.ContentionSteal, "CPU steal (mean)", s.Mean, b.Steal, true)
	}
	if s, ok := c.Metrics[ledger.ContentionTickLag]; ok {
		check(ledger.ContentionTickLag, "harness tick lag p90", s.P90, b.TickLag, false)
	}
	if s, ok := c.Metrics[ledger.ContentionRunDelay]; ok {
		check(ledger.ContentionRunDelay, "harness threads' wait for a CPU (mean per wake-up)", s.Mean, b.RunDelay, false)
	}
	if s, ok := c.Metrics[SendLagMetric]; ok {
		check(SendLagMetric, "harness send lag (p90 of the windows' p99)", s.P90, b.SendLag, false)
	}
	return out
}

// Summary is the contention in one line for a report.
func (c *ContentionResult) Summary() string {
	if c == nil || c.Windows == 0 {
		return ""
	}
	var parts []string
	for _, m := range []struct {
		name, label string
		pct         bool
	}{
		{ledger.ContentionCPUPressure, "CPU pressure", true},
		{ledger.ContentionSteal, "steal", true},
		{ledger.ContentionRunQueue, "run queue per CPU", false},
		{ledger.ContentionHarnessCPU, "harness CPU", false},
		{ledger.ContentionTickLag, "tick lag", false},
		{ledger.ContentionRunDelay, "wait for a CPU per wake-up", false},
		{SendLagMetric, "send lag p99 per window", false},
	} {
		s, ok := c.Metrics[m.name]
		if !ok {
			continue
		}
		switch {
		case m.pct:
			parts = append(parts, fmt.Sprintf("%s mean %.0f%%, max %.0f%%", m.label, 100*s.Mean, 100*s.Max))
		case m.name == ledger.ContentionRunDelay:
			parts = append(parts, fmt.Sprintf("%s mean %s, max %s", m.label, format.SecondsMicro(s.Mean), format.SecondsMicro(s.Max)))
		case m.name == ledger.ContentionTickLag || m.name == SendLagMetric:
			parts = append(parts, fmt.Sprintf("%s p90 %s, max %s", m.label, format.Seconds(s.P90), format.Seconds(s.Max)))
		default:
			parts = append(parts, fmt.Sprintf("%s mean %s, max %s", m.label, strconv.FormatFloat(round2(s.Mean), 'f', -1, 64), strconv.FormatFloat(round2(s.Max), 'f', -1, 64)))
		}
	}
	return fmt.Sprintf("%d windows: %s", c.Windows, strings.Join(parts, "; "))
}

// SendLagMetric is ContentionResult's per-window p99 of the harness's send lag (sent
// minus scheduled, from the sent events), over the contention samples' windows.
const SendLagMetric = "send_lag_p99"

// contentionAcc gathers contention samples, and the send lags to put in their windows.
type contentionAcc struct {
	windows int
	vals    map[string][]float64
	ends    []time.Time // each sample's time: the end of its window
	lags    []timedLag
}

type timedLag struct {
	at  time.Time
	lag float64
}

func (a *contentionAcc) add(e ledger.Event) {
	if a.vals == nil {
		a.vals = map[string][]float64{}
	}
	a.windows++
	a.ends = append(a.ends, e.Time)
	for k, v := range e.Metrics {
		a.vals[k] = append(a.vals[k], v)
	}
}

func (a *contentionAcc) sent(e ledger.Event) { a.lags = append(a.lags, timedLag{e.Time, e.Lag}) }

// sendLagWindows is the p99 of the send lags in each window that has any (a window ends
// at its sample; the first begins one window length before its end).
func (a *contentionAcc) sendLagWindows() []float64 {
	if len(a.ends) == 0 || len(a.lags) == 0 {
		return nil
	}
	ends := append([]time.Time(nil), a.ends...)
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	first := ends[0]
	if len(ends) > 1 {
		first = ends[0].Add(-ends[1].Sub(ends[0]))
	}
	buckets := make([][]float64, len(ends))
	for _, l := range a.lags {
		if l.at.Before(first) {
			continue
		}
		i := sort.Search(len(ends), func(i int) bool { return !ends[i].Before(l.at) })
		if i < len(ends) {
			buckets[i] = append(buckets[i], l.lag)
		}
	}
	var out []float64
	for _, b := range buckets {
		if len(b) > 0 {
			sort.Float64s(b)
			out = append(out, quantile(b, 0.99))
		}
	}
	return out
}

func (a *contentionAcc) result() *ContentionResult {
	if a.windows == 0 {
		return nil
	}
	r := &ContentionResult{Windows: a.windows, Metrics: map[string]ContentionStat{}}
	vals := a.vals
	if w := a.sendLagWindows(); len(w) > 0 {
		vals = map[string][]float64{SendLagMetric: w}
		for k, v := range a.vals {
			vals[k] = v
		}
	}
	for k, vs := range vals {
		s := append([]float64(nil), vs...)
		sort.Float64s(s)
		sum := 0.0
		for _, v := range s {
			sum += v
		}
		r.Metrics[k] = ContentionStat{Mean: round(sum / float64(len(s))), P90: round(quantile(s, 0.9)), Max: round(s[len(s)-1])}
	}
	return r
}

// sessionKey names the agent session a request belongs to ("" outside one).
func sessionKey(e ledger.Event) string {
	if e.Session <= 0 {
		return ""
	}
	return e.Workload + "#" + strconv.Itoa(e.Session)
}
