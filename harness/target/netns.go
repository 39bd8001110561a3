package target

import (
	"context"
	"fmt"

	"pdsoak/scenarios"
	"pdsoak/server/netns"
)

// DefaultNetnsPrefix names the namespaces of reference.netns without netns_prefix.
const DefaultNetnsPrefix = "pdharness"

// startNetns makes one network namespace per process of the reference topology.
func startNetns(ctx context.Context, ref scenarios.Reference) (*netns.Net, error) {
	if ref.Prefill == 0 && ref.Decode == 0 {
		return nil, fmt.Errorf("target: reference.netns needs a PD topology, not colocated")
	}
	if err := netns.Supported(); err != nil {
		return nil, fmt.Errorf("target: reference.netns: %w", err)
	}
	prefix := ref.NetnsPrefix
	if prefix == "" {
		prefix = DefaultNetnsPrefix
	}
	n, err := netns.Create(ctx, prefix, netns.TopologyNames(ref.Prefill, ref.Decode))
	if err != nil {
		return nil, fmt.Errorf("target: reference.netns: %w", err)
	}
	return n, nil
}

// Netns is the namespaces of a reference.netns topology (nil otherwise).
func (t *Embedded) Netns() *netns.Net { return t.netns }
