package router

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"pdsoak/metricnames"
)

// metrics are the router's own series (the workers serve SGLang's).
type metrics struct {
	reg        *prometheus.Registry
	requests   prometheus.Counter
	errors     *prometheus.CounterVec
	retries    prometheus.Counter
	decodeOnly prometheus.Counter // FallbackDecodeOnly attempts (fallback.go)
	ttft       prometheus.Histogram
	e2e        prometheus.Histogram
}

var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics(r *Router) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "pdsoak_router_requests_total",
			Help: "Requests the router accepted or refused."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdsoak_router_request_errors_total",
			Help: "Requests that ended with an error, by error kind."}, []string{"kind"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "pdsoak_router_retries_total",
			Help: "Requests retried on another pair before any output."}),
		decodeOnly: prometheus.NewCounter(prometheus.CounterOpts{Name: "pdsoak_router_decode_only_total",
			Help: "Attempts sent to a decode worker alone because no prefill could take them (--pd-fallback decode-only)."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pdsoak_router_time_to_first_token_seconds",
			Help: "Time from Generate to the first token sent to the client.", Buckets: latencyBuckets}),
		e2e: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pdsoak_router_e2e_request_latency_seconds",
			Help: "Time from Generate to the final event, by any outcome.", Buckets: latencyBuckets}),
	}
	healthy := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricnames.RouterHealthyPairs,
		Help: "1 while at least one healthy prefill/decode pair exists."}, func() float64 { return Up(r.Healthy() == nil) })
	m.reg.MustRegister(m.requests, m.errors, m.retries, m.decodeOnly, m.ttft, m.e2e, healthy, &workerCollector{r},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

var (
	workerUpDesc = prometheus.NewDesc(metricnames.RouterWorkerUp,
		"1 when the worker passes its health checks.", []string{"worker", "role", "url"}, nil)
	outstandingDesc = prometheus.NewDesc(metricnames.RouterOutstanding,
		"Requests in flight per worker.", []string{"worker"}, nil)
)

// workerCollector reports each worker's health and outstanding requests (its
// WorkerState) at scrape time (never stale).
type workerCollector struct{ r *Router }

func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- workerUpDesc
	ch <- outstandingDesc
}

func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.r.workers() {
		ch <- prometheus.MustNewConstMetric(workerUpDesc, prometheus.GaugeValue, Up(w.Healthy()), w.name, w.role, w.url)
		ch <- prometheus.MustNewConstMetric(outstandingDesc, prometheus.GaugeValue, float64(w.Outstanding()), w.name)
	}
}
