package chaos

import (
	"time"

	"pdsoak/chaos/netproxy"
)

// connection_reset resets connections on a link with a TCP RST (toxiproxy reset_peer),
// after an optional delay. Clients must see transport errors, never a hang.
func init() {
	Register(newToxicType("connection_reset",
		"reset connections on a link (TCP RST) through its fault proxy",
		netproxy.ToxicResetPeer,
		[]string{"after=0: delay before the reset", "stream=upstream: upstream, downstream or both", "toxicity=1: share of connections affected, in (0, 1]"},
		func(p *params) (map[string]any, []string) {
			after := p.Duration("after", 0*time.Millisecond)
			return map[string]any{"timeout": ms(after)}, streamsParam(p, netproxy.Upstream)
		}))
}
