package chaos

import "pdsoak/chaos/netproxy"

// bandwidth_limit caps a link's throughput (toxiproxy bandwidth toxic). On the KV link it
// stretches transfers; transfer bounds must still hold.
func init() {
	Register(newToxicType("bandwidth_limit",
		"cap a link's bandwidth through its fault proxy",
		netproxy.ToxicBandwidth,
		[]string{"rate=64: KB/s", "stream=downstream: upstream, downstream or both", "toxicity=1: share of connections affected, in (0, 1]"},
		func(p *params) (map[string]any, []string) {
			rate := p.Int("rate", 64, 1, 1<<30)
			return map[string]any{"rate": rate}, streamsParam(p, netproxy.Downstream)
		}))
}
