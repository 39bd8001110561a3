package telemetry

import (
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"pdsoak/ledger"
)

// Namespace prefixes every series the harness exports.
const Namespace = "pdsoak"

// Series names (without the _bucket/_sum/_count suffixes of histograms); the dashboard
// test checks every query against this list.
const (
	SeriesRequests    = Namespace + "_requests_total"
	SeriesInFlight    = Namespace + "_in_flight"
	SeriesTTFT        = Namespace + "_ttft_seconds"
	SeriesITL         = Namespace + "_itl_seconds"
	SeriesE2E         = Namespace + "_e2e_seconds"
	SeriesSilentDrops = Namespace + "_silent_drops_total"
	SeriesFaultActive = Namespace + "_fault_active"
	SeriesHarnessLag  = Namespace + "_harness_lag_seconds"
	SeriesRunInfo     = Namespace + "_run_info"
)

// Histograms are the series above that are classic histograms.
var Histograms = []string{SeriesTTFT, SeriesITL, SeriesE2E, SeriesHarnessLag}

// Series lists every series name a scrape of Metrics contains (histograms as their
// _bucket, _sum and _count series), for the dashboard test.
func Series() []string {
	out := []string{SeriesRequests, SeriesInFlight, SeriesSilentDrops, SeriesFaultActive, SeriesRunInfo}
	for _, h := range Histograms {
		out = append(out, h+"_bucket", h+"_sum", h+"_count")
	}
	return out
}

// LabelNames lists every label a pdsoak_ series may carry ("le" on histogram buckets;
// shard only in sharded runs), for the dashboard test.
func LabelNames() []string {
	return []string{"scenario", "shard", "workload", "outcome", "cause", "fault", "type", "seed", "label", "le"}
}

// Bucket bounds in seconds. Classic histograms rather than native ones: Prometheus
// 2.x takes native histograms only behind a feature flag, and remote write 1.0 and
// Grafana's histogram_quantile read classic buckets everywhere.
var (
	LatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	ITLBuckets     = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	LagBuckets     = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
)

// Labels are the run's labels. Scenario (and Shard, "i" of a sharded run) go on every
// series, so that a dashboard selects a run and sums its shards; Seed and Label are on
// run_info.
type Labels struct {
	Scenario string
	Seed     int64
	Label    string // --label (a commit id, a build number)
	Shard    string // "i" of --shard i/n; "" for a whole run
}

// valid makes every label UTF-8: --label is whatever bytes the command line held, and
// client_golang panics on a label value that is not UTF-8 (OTLP's protobuf strings refuse
// it too).
func (l Labels) valid() Labels {
	for _, s := range []*string{&l.Scenario, &l.Label, &l.Shard} {
		*s = strings.ToValidUTF8(*s, "\uFFFD")
	}
	return l
}

// Metrics is the live registry: it follows the ledger's events (Observe) and exposes
// them as Prometheus series. Safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
	ttft     *prometheus.HistogramVec
	itl      *prometheus.HistogramVec
	e2e      *prometheus.HistogramVec
	silent   *prometheus.CounterVec
	fault    *prometheus.GaugeVec
	lag      prometheus.Histogram

	mu     sync.Mutex
	faults map[string]string // active fault name -> type, for fault_stop (which has no type)
}

// NewMetrics builds the registry for one run. withProcess adds the Go runtime and
// process collectors (go_*, process_*), which a /metrics endpoint usually carries.
func NewMetrics(l Labels, withProcess bool) *Metrics {
	l = l.valid()
	reg := prometheus.NewRegistry()
	run := prometheus.Labels{"scenario": l.Scenario}
	if l.Shard != "" {
		run["shard"] = l.Shard
	}
	r := prometheus.WrapRegistererWith(run, reg)
	m := &Metrics{reg: reg, faults: map[string]string{}}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: SeriesRequests,
		Help: "Requests resolved, by outcome and by the cause that explains a non-ok outcome (\"\" for ok)."},
		[]string{"workload", "outcome", "cause"})
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: SeriesInFlight,
		Help: "Requests scheduled and not yet resolved."}, []string{"workload"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: SeriesTTFT,
		Help: "Time to first token, from the scheduled send time (requests that got a token).", Buckets: LatencyBuckets}, []string{"workload"})
	m.itl = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: SeriesITL,
		Help: "Inter-token (inter-chunk) gaps.", Buckets: ITLBuckets}, []string{"workload"})
	m.e2e = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: SeriesE2E,
		Help: "End-to-end time of every resolved request, whatever its outcome.", Buckets: LatencyBuckets}, []string{"workload"})
	m.silent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: SeriesSilentDrops,
		Help: "Silent drops (stalled + deadline_exceeded)."}, []string{"workload"})
	m.fault = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: SeriesFaultActive,
		Help: "1 while a declared fault is applied, 0 after it is reverted."}, []string{"fault", "type"})
	m.lag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: SeriesHarnessLag,
		Help: "The harness's own send lag (sent - scheduled): high values mean the harness, not the server, was late.", Buckets: LagBuckets})
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: SeriesRunInfo,
		Help: "The run's identity; always 1."}, []string{"seed", "label"})
	info.WithLabelValues(strconv.FormatInt(l.Seed, 10), l.Label).Set(1)
	r.MustRegister(m.requests, m.inFlight, m.ttft, m.itl, m.e2e, m.silent, m.fault, m.lag, info)
	if withProcess {
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Gatherer is the registry, for /metrics and remote write.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Observe folds one ledger event into the series. It is cheap and called from the
// goroutines that emit events.
func (m *Metrics) Observe(ev ledger.Event) {
	switch ev.Type {
	case ledger.EventScheduled:
		m.inFlight.WithLabelValues(ev.Workload).Inc()
	case ledger.EventSent:
		m.lag.Observe(max(ev.Lag, 0))
	case ledger.EventDone:
		m.done(ev)
	case ledger.EventFaultStart:
		m.mu.Lock()
		m.faults[ev.Fault] = ev.FaultType
		m.mu.Unlock()
		m.fault.WithLabelValues(ev.Fault, ev.FaultType).Set(1)
	case ledger.EventFaultStop:
		m.mu.Lock()
		typ, ok := m.faults[ev.Fault]
		delete(m.faults, ev.Fault)
		m.mu.Unlock()
		if ev.FaultType != "" {
			typ, ok = ev.FaultType, true
		}
		if ok {
			m.fault.WithLabelValues(ev.Fault, typ).Set(0)
		}
	}
}

func (m *Metrics) done(ev ledger.Event) {
	m.inFlight.WithLabelValues(ev.Workload).Dec()
	m.requests.WithLabelValues(ev.Workload, string(ev.Outcome), ev.Cause).Inc()
	if ev.Outcome.SilentDrop() {
		m.silent.WithLabelValues(ev.Workload).Inc()
	}
	// The same samples as the reports: TTFT where a token came, every gap, and the
	// end-to-end time of every resolved request.
	if ev.TTFT > 0 {
		m.ttft.WithLabelValues(ev.Workload).Observe(ev.TTFT)
	}
	if len(ev.ITL) > 0 {
		h := m.itl.WithLabelValues(ev.Workload)
		for _, g := range ev.ITL {
			h.Observe(g)
		}
	}
	m.e2e.WithLabelValues(ev.Workload).Observe(ev.E2E)
}
