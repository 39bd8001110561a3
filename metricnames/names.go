package metricnames

// SGLang's scheduler gauges (python/sglang/srt/metrics/collector.py), as the reference
// server exports them.
const (
	// Running: requests in the running (decode) or forward (prefill) batch.
	Running = "sglang:num_running_reqs"
	// Queue: requests in the waiting queue.
	Queue = "sglang:num_queue_reqs"
	// DecodePrealloc: decode requests waiting for KV pages (the head-of-line queue).
	DecodePrealloc = "sglang:num_decode_prealloc_queue_reqs"
	// DecodeTransfer: decode requests receiving KV from prefill.
	DecodeTransfer = "sglang:num_decode_transfer_queue_reqs"
	// PrefillBootstrap: prefill requests waiting for decode to register (bootstrap queue).
	PrefillBootstrap = "sglang:num_prefill_prealloc_queue_reqs"
	// PrefillInflight: prefill requests sending KV to decode.
	PrefillInflight = "sglang:num_prefill_inflight_queue_reqs"
	// Retracted: in SGLang, requests retracted since the previous stats log (an event
	// count the idle refresh re-publishes unchanged, so not a held request); in the
	// reference server, decode requests whose KV is taken back now.
	Retracted = "sglang:num_retracted_reqs"
	// BootstrapQueue: the prefill bootstrap queue under the name newer SGLang exports
	// (python/sglang/srt/observability/metrics_collector.py renamed PrefillBootstrap).
	BootstrapQueue = "sglang:num_prefill_bootstrap_queue_reqs"
	// TokenUsage: the fraction of the KV pool in use.
	TokenUsage = "sglang:token_usage"
	// GenThroughput: generated tokens per second.
	GenThroughput = "sglang:gen_throughput"
	// UsedTokens and MaxTotalTokens: KV tokens in use and the pool's capacity.
	UsedTokens     = "sglang:num_used_tokens"
	MaxTotalTokens = "sglang:max_total_num_tokens"
)

// The reference server's own KV pool gauges.
const (
	KVPagesUsed  = "pdsoak:kv_pages_used"
	KVPagesTotal = "pdsoak:kv_pages_total"
)

// The prefix cache: SGLang's names (docs/references/production_metrics.md: the
// cache_hit_rate gauge and the cached_tokens_total counter, labelled cache_source) and
// the reference server's own locked-node gauge, which must return to 0 after a drain.
const (
	CacheHitRate      = "sglang:cache_hit_rate"
	CachedTokensTotal = "sglang:cached_tokens_total"
	RadixLockedNodes  = "pdsoak:radix_cache_locked_nodes"
	RadixCachedPages  = "pdsoak:radix_cache_pages"
)

// vLLM's scheduler gauges.
const (
	VLLMRunning       = "vllm:num_requests_running"
	VLLMWaiting       = "vllm:num_requests_waiting"
	VLLMSwapped       = "vllm:num_requests_swapped"
	VLLMGPUCacheUsage = "vllm:gpu_cache_usage_perc"
	VLLMKVCacheUsage  = "vllm:kv_cache_usage_perc"
)

// The reference router's health gauges (the per-worker ones carry a worker label).
const (
	RouterHealthyPairs = "pdsoak_router_healthy_pairs"
	RouterOutstanding  = "pdsoak_router_outstanding_requests"
	RouterWorkerUp     = "pdsoak_router_worker_healthy"
)

// TransitQueues are SGLang's PD queues every disaggregated request passes through on
// its way (bootstrap handshake, KV preallocation, KV transfer), loaded or not: above
// zero they show traffic, not pressure, so no fault is proved by them.
var TransitQueues = []string{PrefillBootstrap, BootstrapQueue, PrefillInflight, DecodePrealloc, DecodeTransfer}

// LeakGauges are the gauges that must return to 0 once load has drained: running and
// queued requests, SGLang's PD queues and vLLM's running, waiting and swapped. Not
// Retracted: a drained SGLang keeps reporting its last interval's retractions.
var LeakGauges = []string{
	Running, Queue, DecodePrealloc, DecodeTransfer, PrefillBootstrap, PrefillInflight, BootstrapQueue,
	VLLMRunning, VLLMWaiting, VLLMSwapped, RadixLockedNodes,
}

// PoolUsageGauges are a KV pool's usage as a fraction of 1, one series per DP rank
// (SGLang) or engine (vLLM): the pool's figure is the fullest series, never their sum.
var PoolUsageGauges = []string{TokenUsage, VLLMKVCacheUsage, VLLMGPUCacheUsage}

// UsageGauges are recorded in periodic samples besides the leak gauges (Retracted too,
// which the leak check leaves out).
var UsageGauges = []string{TokenUsage, GenThroughput, VLLMGPUCacheUsage, VLLMKVCacheUsage, CacheHitRate, Retracted}

// PrefillsCompleted is the reference prefill worker's counter of prompts whose KV
// reached decode (the proof that disaggregation happened).
const PrefillsCompleted = "pdsoak:prefills_completed_total"
