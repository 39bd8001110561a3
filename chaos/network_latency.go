package chaos

import (
	"time"

	"pdsoak/chaos/netproxy"
)

// network_latency delays data on a link (toxiproxy latency toxic).
func init() {
	Register(newToxicType("network_latency",
		"add latency (± jitter) to a link through its fault proxy",
		netproxy.ToxicLatency,
		[]string{"latency=200ms: added delay", "jitter=0: ± random jitter", "stream=downstream: upstream, downstream or both", "toxicity=1: share of connections affected, in (0, 1]"},
		func(p *params) (map[string]any, []string) {
			lat := p.Duration("latency", 200*time.Millisecond)
			jit := p.Duration("jitter", 0)
			return map[string]any{"latency": ms(lat), "jitter": ms(jit)}, streamsParam(p, netproxy.Downstream)
		}))
}
