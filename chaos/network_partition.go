package chaos

import "pdsoak/scenarios"

// network_partition takes a link down: its proxy stops listening and cuts every open
// connection. Verified by dialling the proxy (refused); reverted by bringing it up on the
// same address.
func init() {
	Register(Type{
		Name:    "network_partition",
		Doc:     "partition a link: its fault proxy refuses connections and cuts open ones",
		Targets: scenarios.TargetLink,
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			if err := p.done(); err != nil {
				return nil, err
			}
			return &partitionFault{base: b}, nil
		},
	})
}
