package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"pdsoak/server/scheduler"
)

// metrics are the engine's Prometheus series, named as SGLang names them.
type metrics struct {
	running, queue, decPrealloc, decTransfer, prefBootstrap, prefInflight, retracted prometheus.Gauge
	tokenUsage, genThroughput, usedTokens, maxTokens, pagesUsed, pagesTotal          prometheus.Gauge

	ttft, itl, e2e prometheus.Histogram

	requests, promptTokens, genTokens, aborts, bootstrapFailed, transferFailed, retractions prometheus.Counter
	timeouts, refused, finished                                                             *prometheus.CounterVec
	prefillsCompleted, localPrefills                                                        prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	h := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	lat := []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	m := &metrics{
		running:       g("sglang:num_running_reqs", "Requests in the running (decode) or forward (prefill) batch."),
		queue:         g("sglang:num_queue_reqs", "Requests in the waiting queue."),
		decPrealloc:   g("sglang:num_decode_prealloc_queue_reqs", "Decode: requests waiting for KV pages."),
		decTransfer:   g("sglang:num_decode_transfer_queue_reqs", "Decode: requests receiving KV from prefill."),
		prefBootstrap: g("sglang:num_prefill_prealloc_queue_reqs", "Prefill: requests in the bootstrap queue (waiting for decode to register)."),
		prefInflight:  g("sglang:num_prefill_inflight_queue_reqs", "Prefill: requests sending KV to decode."),
		retracted:     g("sglang:num_retracted_reqs", "Decode: requests whose KV was taken back."),
		tokenUsage:    g("sglang:token_usage", "Fraction of the KV pool in use."),
		genThroughput: g("sglang:gen_throughput", "Generated tokens per second."),
		usedTokens:    g("sglang:num_used_tokens", "KV tokens in use (pages × page size)."),
		maxTokens:     g("sglang:max_total_num_tokens", "KV pool capacity in tokens."),
		pagesUsed:     g("pdsoak:kv_pages_used", "KV pages in use."),
		pagesTotal:    g("pdsoak:kv_pages_total", "KV pool capacity in pages."),
		ttft:          h("sglang:time_to_first_token_seconds", "Time to first token.", lat),
		itl:           h("sglang:inter_token_latency_seconds", "Time between streamed tokens.", lat),
		e2e:           h("sglang:e2e_request_latency_seconds", "Arrival to finish.", lat),
		requests:      c("sglang:num_requests_total", "Requests finished (any outcome)."),
		promptTokens:  c("sglang:prompt_tokens_total", "Prompt tokens of finished requests."),
		genTokens:     c("sglang:generation_tokens_total", "Generated tokens."),
		aborts:        c("sglang:num_aborted_requests_total", "Requests aborted (client went away or shutdown)."),
		bootstrapFailed: c("sglang:num_bootstrap_failed_reqs_total",
			"PD requests that failed in the bootstrap stage."),
		transferFailed: c("sglang:num_transfer_failed_reqs_total", "PD requests whose KV transfer failed."),
		retractions:    c("sglang:num_retractions_total", "Requests retracted when the KV pool ran out."),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdsoak:request_timeouts_total",
			Help: "Requests ended by a stage bound, by stage."}, []string{"stage"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdsoak:requests_refused_total",
			Help: "Requests refused at admission, by error kind."}, []string{"kind"}),
		// The counter that proves disaggregation (pd_path): one per prompt a prefill
		// worker computed whose KV reached decode; and its opposite on decode.
		prefillsCompleted: c("pdsoak:prefills_completed_total",
			"Prefill: requests whose prompt this worker computed and whose KV reached decode."),
		localPrefills: c("pdsoak:decode_local_prefills_total",
			"Decode: requests that came without a bootstrap room (a router's decode-only fallback), prompt computed here."),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdsoak:requests_finished_total",
			Help: "Finished requests by outcome (stop, length or an error kind)."}, []string{"outcome"}),
	}
	for _, col := range []prometheus.Collector{m.running, m.queue, m.decPrealloc, m.decTransfer, m.prefBootstrap,
		m.prefInflight, m.retracted, m.tokenUsage, m.genThroughput, m.usedTokens, m.maxTokens, m.pagesUsed,
		m.pagesTotal, m.ttft, m.itl, m.e2e, m.requests, m.promptTokens, m.genTokens, m.aborts,
		m.bootstrapFailed, m.transferFailed, m.retractions, m.timeouts, m.refused, m.finished, m.prefillsCompleted, m.localPrefills} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	for _, st := range []scheduler.Stage{scheduler.StageBootstrap, scheduler.StagePrealloc, scheduler.StageTransfer,
		scheduler.StageWaiting, scheduler.StageRunning, scheduler.StageTotal} {
		m.timeouts.WithLabelValues(string(st))
	}
	return m, nil
}

func (m *metrics) setStats(st scheduler.Stats) {
	m.running.Set(float64(st.Running))
	m.queue.Set(float64(st.Waiting))
	m.decPrealloc.Set(float64(st.Prealloc))
	m.decTransfer.Set(float64(st.Transfer))
	m.prefBootstrap.Set(float64(st.Bootstrap))
	m.prefInflight.Set(float64(st.Inflight))
	m.retracted.Set(float64(st.Retracted))
	m.pagesUsed.Set(float64(st.UsedPages))
	m.pagesTotal.Set(float64(st.TotalPages))
	m.usedTokens.Set(float64(st.UsedPages * st.PageSize))
	m.maxTokens.Set(float64(st.TotalPages * st.PageSize))
	if st.TotalPages > 0 {
		m.tokenUsage.Set(float64(st.UsedPages) / float64(st.TotalPages))
	}
}
