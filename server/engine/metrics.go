package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"pdsoak/metricnames"
	"pdsoak/server/scheduler"
)

// metrics are the engine's Prometheus series, named as SGLang names them.
type metrics struct {
	running, queue, decPrealloc, decTransfer, prefBootstrap, prefInflight, retracted prometheus.Gauge
	tokenUsage, genThroughput, usedTokens, maxTokens, pagesUsed, pagesTotal          prometheus.Gauge

	ttft, itl, e2e prometheus.Histogram

	requests, promptTokens, genTokens, aborts, bootstrapFailed, transferFailed, retractions prometheus.Counter
	timeouts, refused, finished                                                             *prometheus.CounterVec

	stat                                  map[string]prometheus.Gauge // the gauges StatGauges names
	cacheHitRate, radixLocked, radixPages prometheus.Gauge
	cachedTokens                          prometheus.Counter
	cachedSeen                            uint64 // CacheHitTokens already added to cachedTokens
	prefillsCompleted, localPrefills      prometheus.Counter

	// What setStats and setCache last published (set: once they have).
	lastStats          scheduler.Stats
	lastCache          [4]uint64
	statsSet, cacheSet bool
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
		running:       g(metricnames.Running, "Requests in the running (decode) or forward (prefill) batch."),
		queue:         g(metricnames.Queue, "Requests in the waiting queue."),
		decPrealloc:   g(metricnames.DecodePrealloc, "Decode: requests waiting for KV pages."),
		decTransfer:   g(metricnames.DecodeTransfer, "Decode: requests receiving KV from prefill."),
		prefBootstrap: g(metricnames.PrefillBootstrap, "Prefill: requests in the bootstrap queue (waiting for decode to register)."),
		prefInflight:  g(metricnames.PrefillInflight, "Prefill: requests sending KV to decode."),
		retracted:     g(metricnames.Retracted, "Decode: requests whose KV was taken back."),
		tokenUsage:    g(metricnames.TokenUsage, "Fraction of the KV pool in use."),
		genThroughput: g(metricnames.GenThroughput, "Generated tokens per second."),
		usedTokens:    g(metricnames.UsedTokens, "KV tokens in use (pages × page size)."),
		maxTokens:     g(metricnames.MaxTotalTokens, "KV pool capacity in tokens."),
		pagesUsed:     g(metricnames.KVPagesUsed, "KV pages in use."),
		pagesTotal:    g(metricnames.KVPagesTotal, "KV pool capacity in pages."),
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
		prefillsCompleted: c(metricnames.PrefillsCompleted,
			"Prefill: requests whose prompt this worker computed and whose KV reached decode."),
		localPrefills: c("pdsoak:decode_local_prefills_total",
			"Decode: requests that came without a bootstrap room (a router's decode-only fallback), prompt computed here."),
		cacheHitRate: g(metricnames.CacheHitRate, "Prefix cache hit rate: prompt tokens served from the radix cache over prompt tokens looked up."),
		radixLocked:  g(metricnames.RadixLockedNodes, "Radix cache nodes locked by live requests (0 after a drain, else a leak)."),
		radixPages:   g(metricnames.RadixCachedPages, "KV pages held by the radix cache."),
		cachedTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: metricnames.CachedTokensTotal,
			Help: "Prompt tokens served from the prefix cache.", ConstLabels: prometheus.Labels{"cache_source": "device"}}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdsoak:requests_finished_total",
			Help: "Finished requests by outcome (stop, length or an error kind)."}, []string{"outcome"}),
	}
	for _, col := range []prometheus.Collector{m.running, m.queue, m.decPrealloc, m.decTransfer, m.prefBootstrap,
		m.prefInflight, m.retracted, m.tokenUsage, m.genThroughput, m.usedTokens, m.maxTokens, m.pagesUsed,
		m.pagesTotal, m.ttft, m.itl, m.e2e, m.requests, m.promptTokens, m.genTokens, m.aborts,
		m.bootstrapFailed, m.transferFailed, m.retractions, m.timeouts, m.refused, m.finished, m.prefillsCompleted, m.localPrefills,
		m.cacheHitRate, m.radixLocked, m.radixPages, m.cachedTokens} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	m.stat = map[string]prometheus.Gauge{metricnames.Running: m.running, metricnames.Queue: m.queue,
		metricnames.DecodePrealloc: m.decPrealloc, metricnames.DecodeTransfer: m.decTransfer,
		metricnames.PrefillBootstrap: m.prefBootstrap, metricnames.PrefillInflight: m.prefInflight,
		metricnames.Retracted: m.retracted, metricnames.TokenUsage: m.tokenUsage, metricnames.UsedTokens: m.usedTokens,
		metricnames.MaxTotalTokens: m.maxTokens, metricnames.KVPagesUsed: m.pagesUsed, metricnames.KVPagesTotal: m.pagesTotal,
		metricnames.CacheHitRate: m.cacheHitRate, metricnames.RadixLockedNodes: m.radixLocked, metricnames.RadixCachedPages: m.radixPages}
	for _, st := range []scheduler.Stage{scheduler.StageBootstrap, scheduler.StagePrealloc, scheduler.StageTransfer,
		scheduler.StageWaiting, scheduler.StageRunning, scheduler.StageTotal} {
		m.timeouts.WithLabelValues(string(st))
	}
	return m, nil
}

func (m *metrics) setStats(st scheduler.Stats) {
	// The loop publishes on every iteration, mostly with nothing changed; building the
	// map and setting every gauge was about 5 % of a worker's CPU at one request in
	// flight. Skipping unchanged figures leaves the gauges as they are.
	key := publishedStats(st)
	if m.statsSet && key == m.lastStats {
		return
	}
	m.lastStats, m.statsSet = key, true
	m.cacheSet = false // the cache gauges are written here too: setCache writes them again
	// No map per publish: eachStatGauge is StatGauges's rule without it.
	eachStatGauge(st, func(name string, v float64) { m.stat[name].Set(v) })
}

// publishedStats is st without the fields no gauge shows, so that two Stats publish
// the same gauge values exactly when their publishedStats are equal.
func publishedStats(st scheduler.Stats) scheduler.Stats {
	st.Queued, st.PendingRegistrations, st.DecodeSteps, st.EvictedPages, st.GeneratedTokens = 0, 0, 0, 0, 0
	return st
}

// setCache publishes the prefix cache's live figures.
func (m *metrics) setCache(st scheduler.Stats) {
	key := [4]uint64{uint64(st.LockedNodes), uint64(st.CachedPages), st.CacheQueriedTokens, st.CacheHitTokens}
	if m.cacheSet && key == m.lastCache {
		return // unchanged (see setStats)
	}
	m.lastCache, m.cacheSet = key, true
	for name, v := range CacheGauges(st) {
		m.stat[name].Set(v)
	}
	if st.CacheHitTokens > m.cachedSeen {
		m.cachedTokens.Add(float64(st.CacheHitTokens - m.cachedSeen))
		m.cachedSeen = st.CacheHitTokens
	}
}

// StatGauges is what the scheduler gauges read for st (setStats publishes them; the
// simulator's workers answer scrapes with them): the queues, the KV pool in pages and
// tokens, and its usage.
func StatGauges(st scheduler.Stats) map[string]float64 {
	g := make(map[string]float64, 15)
	eachStatGauge(st, func(name string, v float64) { g[name] = v })
	return g
}

// eachStatGauge calls set with each of StatGauges's names and values (setStats runs on
// every loop iteration that changed a figure: building the map there was a worker's
// largest allocation per request at zero compute).
func eachStatGauge(st scheduler.Stats, set func(name string, v float64)) {
	usage := 0.0
	if st.TotalPages > 0 {
		usage = float64(st.UsedPages) / float64(st.TotalPages)
	}
	set(metricnames.Running, float64(st.Running))
	set(metricnames.Queue, float64(st.Waiting))
	set(metricnames.DecodePrealloc, float64(st.Prealloc))
	set(metricnames.DecodeTransfer, float64(st.Transfer))
	set(metricnames.PrefillBootstrap, float64(st.Bootstrap))
	set(metricnames.PrefillInflight, float64(st.Inflight))
	set(metricnames.Retracted, float64(st.Retracted))
	set(metricnames.UsedTokens, float64(st.UsedPages*st.PageSize))
	set(metricnames.MaxTotalTokens, float64(st.TotalPages*st.PageSize))
	set(metricnames.KVPagesUsed, float64(st.UsedPages))
	set(metricnames.KVPagesTotal, float64(st.TotalPages))
	set(metricnames.TokenUsage, usage)
	set(metricnames.CacheHitRate, hitRate(st))
	set(metricnames.RadixLockedNodes, float64(st.LockedNodes))
	set(metricnames.RadixCachedPages, float64(st.CachedPages))
}

// CacheGauges are the prefix cache's gauges for st, published live from
// Scheduler.CacheStats (the real engine and the simulator both) whatever the semantics.
func CacheGauges(st scheduler.Stats) map[string]float64 {
	return map[string]float64{
		metricnames.CacheHitRate:     hitRate(st),
		metricnames.RadixLockedNodes: float64(st.LockedNodes),
		metricnames.RadixCachedPages: float64(st.CachedPages),
	}
}

// hitRate is the share of looked-up prompt tokens the prefix cache served (0 before
// any lookup, and without a cache).
func hitRate(st scheduler.Stats) float64 {
	if st.CacheQueriedTokens == 0 {
		return 0
	}
	return float64(st.CacheHitTokens) / float64(st.CacheQueriedTokens)
}
