package chaos_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"pdsoak/chaos"
	"pdsoak/chaos/netproxy"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// A harness-side Env built from FuncEnv over real link proxies, running a timeline with
// one partition of the KV link.
func ExampleTimeline() {
	upstream, _ := net.Listen("tcp", "127.0.0.1:0") // stands in for decode's KV port
	defer upstream.Close()

	links := netproxy.New()
	defer links.Close()
	_, _ = links.Hook("prefill-0->decode-0", upstream.Addr().String()) // launcher.Config.Links

	env := &chaos.FuncEnv{
		MembersFunc: func(target string) []string {
			if target == "prefill->decode" {
				return []string{"prefill-0->decode-0"}
			}
			return nil
		},
		LinkFunc: chaos.LinksFrom(links),
		EmitFunc: func(ev ledger.Event) {
			passed := ""
			if ev.Passed != nil {
				passed = fmt.Sprintf(" passed=%v", *ev.Passed)
			}
			fmt.Printf("%s %s%s\n", ev.Type, ev.Fault, passed)
		},
	}
	tl, err := chaos.NewTimeline([]scenarios.Fault{{
		Name: "kv-cut", Type: "network_partition", Target: "prefill->decode",
		At: 0, For: scenarios.Duration(10 * time.Millisecond),
	}}, chaos.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tl.Run(context.Background(), env, time.Now()); err != nil {
		fmt.Println("exit 3:", err)
	}
	// Output:
	// fault_start kv-cut
	// fault_verified kv-cut passed=true
	// fault_stop kv-cut
}
