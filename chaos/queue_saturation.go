package chaos

import (
	"pdsoak/metricnames"
	"pdsoak/scenarios"
)

// queue_saturation sends a burst of concurrent requests to fill the queues. Strict
// semantics must refuse the excess at admission (429/503 with Retry-After); sglang
// semantics lets it sit in the PD queues. Verified by explicit refusals, a waiting-queue
// gauge of the target process above zero (sglang:num_queue_reqs, vllm:num_requests_waiting),
// or, for a burst sent at once, a stream of it served to its end while another still
// waited for its first token (RunStats.QueuedBehind).
func init() {
	Register(Type{
		Name:    "queue_saturation",
		Doc:     "burst of concurrent requests that saturates the queues",
		Targets: scenarios.TargetProcess | scenarios.TargetWorkload,
		Params: []string{"requests=200", "concurrency=0: in flight at once (0: all)",
			"prompt_tokens=64", "max_tokens=256"},
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			burst := Burst{
				Requests:     p.Int("requests", 200, 1, 100000),
				Concurrency:  p.Int("concurrency", 0, 0, 100000),
				PromptTokens: p.Int("prompt_tokens", 64, 1, 1<<20),
				MaxTokens:    p.Int("max_tokens", 256, 1, 1<<20),
			}
			if err := p.done(); err != nil {
				return nil, err
			}
			// Only waiting queues: every PD request passes through the bootstrap,
			// prealloc and transfer queues on its way (metricnames.TransitQueues), so
			// those are above zero under any load and prove nothing.
			return &burstFault{base: b, burst: burst, waitIsEnough: true, gauges: []string{
				metricnames.Queue, metricnames.VLLMWaiting,
			}}, nil
		},
	})
}
