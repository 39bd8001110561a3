// Package netproxy puts a TCP fault proxy on each link of a topology, built on toxiproxy
// v2.12.0 used as a library (no HTTP API is opened). The launcher asks Links.Hook for a
// proxy address in front of each upstream ("router->decode-0", "prefill-0->decode-0") and
// hands that address to the process that dials the link; the chaos package then adds
// toxics (latency, bandwidth, timeout = black hole, reset_peer, slicer, limit_data) or
// takes a link down (a partition: the listener closes and open connections are cut).
//
// Every link carries two internal pass-through toxics that count bytes per direction and
// connections, live, so that a fault can prove it took effect (toxiproxy's own metrics
// are only added when a connection closes).
//
// Removing a toxic can block inside toxiproxy for as long as a connection does not read
// what a toxic holds for it, and for good when that connection closes meanwhile
// (Shopify/toxiproxy#558). RemoveToxic, ResetToxics and Heal therefore return by their
// ctx with an error that says so, leaving the removal to finish in the background; the
// counting toxics let an interrupt through, passing on the chunk they hold within 5 s
// (Counters.Dropped counts what they could not).
//
// Main use:
//
//	links := netproxy.New()
//	defer links.Close()
//	cfg.Links = links.Hook                      // launcher.Config
//	...
//	k, _ := links.Link("router->decode-0")
//	_ = k.AddToxic(netproxy.Toxic{Type: netproxy.ToxicLatency, Attributes: map[string]any{"latency": 500}})
//	before := k.Counters() // after AddToxic: earlier bytes never met the toxic
//	... traffic ...
//	moved := k.Counters().DownBytes > before.DownBytes
//	_ = k.RemoveToxic(ctx, "latency_downstream")
//	_ = k.Down(); _ = k.Up()
package netproxy
