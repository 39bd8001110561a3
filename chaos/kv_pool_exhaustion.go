package chaos

import (
	"pdsoak/metricnames"
	"pdsoak/scenarios"
)

// kv_pool_exhaustion sends a burst of long prompts with long completions so that the KV
// pool of the target (decode) runs out — the incident's trigger, without waiting for
// agent contexts to grow. A load burst rather than a failpoint, so that the real
// allocator, retraction and prealloc queue are exercised. Verified by
// sglang:token_usage (vLLM: vllm:kv_cache_usage_perc) ≥ min_usage, a retracted count
// above zero and changed since Apply on the target process, or explicit refusals. Not by the prealloc queue:
// every PD request waits in it for its bootstrap handshake, with the pool empty or not.
func init() {
	Register(Type{
		Name:    "kv_pool_exhaustion",
		Doc:     "burst of long prompts that exhausts the target's KV pool",
		Targets: scenarios.TargetProcess | scenarios.TargetWorkload,
		Params: []string{"requests=64", "concurrency=0: in flight at once (0: all)",
			"prompt_tokens=2048", "max_tokens=512", "min_usage=0.9: sglang:token_usage (vllm:kv_cache_usage_perc) that proves exhaustion"},
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			burst := Burst{
				Requests:     p.Int("requests", 64, 1, 100000),
				Concurrency:  p.Int("concurrency", 0, 0, 100000),
				PromptTokens: p.Int("prompt_tokens", 2048, 1, 1<<22),
				MaxTokens:    p.Int("max_tokens", 512, 1, 1<<22),
			}
			usage := p.Float("min_usage", 0.9, 0.01, 1)
			if err := p.done(); err != nil {
				return nil, err
			}
			return &burstFault{base: b, burst: burst, usage: usage, gauges: []string{metricnames.Retracted}}, nil
		},
	})
}
