package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"pdsoak/server/launcher"
	"pdsoak/server/netns"
)

// netnsOptions are up's --netns flags: every process in its own network namespace.
type netnsOptions struct {
	on     bool
	prefix string
}

func (o *netnsOptions) register(fs *pflag.FlagSet) {
	fs.BoolVar(&o.on, "netns", false, "run router, prefill and decode each in its own network namespace, joined by veth pairs on a bridge (root only; --host is ignored)")
	fs.StringVar(&o.prefix, "netns-prefix", "pdsoak", "prefix of the namespaces and links --netns makes; leftovers with this prefix are removed at start")
}

// start makes the namespaces when --netns is set and returns the launcher's Place hook
// (nil without --netns) and a func that removes them, which the caller must run.
func (o *netnsOptions) start(ctx context.Context, out io.Writer, p, d int) (func(string) (launcher.Placement, bool), func(), error) {
	if !o.on {
		return nil, func() {}, nil
	}
	if err := netns.ValidPrefix(o.prefix); err != nil {
		return nil, nil, &UsageError{Err: fmt.Errorf("up: --netns-prefix: %w", err)}
	}
	if err := netns.Supported(); err != nil {
		return nil, nil, fmt.Errorf("cli: up --netns: %w", err)
	}
	n, err := netns.Create(ctx, o.prefix, netns.TopologyNames(p, d))
	if err != nil {
		return nil, nil, fmt.Errorf("cli: up --netns: %w", err)
	}
	fmt.Fprintf(out, "netns: bridge %s %s/24 (this namespace: %s)\n", n.Bridge, n.Subnet.IP, n.Gateway)
	for _, name := range netns.TopologyNames(p, d) {
		m, _ := n.Member(name)
		fmt.Fprintf(out, "netns: %-10s namespace %-20s %-12s veth %s\n", name, m.Namespace, m.Addr, m.HostIf)
	}
	return n.Place, func() {
		if err := n.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "pdserver up: removing namespaces: %v\n", err)
		}
	}, nil
}
