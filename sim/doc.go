// Package sim runs a scenario's whole PD topology and its workloads in one goroutine on a
// virtual clock (`harness run --sim`). Nothing here has a second copy of the serving
// decisions: the workers are the real server/scheduler state machines and the router's
// choices come from server/router's pure functions; the simulator replaces only the
// drivers — goroutines, sockets and the wall clock become one event queue (Loop).
//
// Two halves meet at the Server interface (server.go):
//
//   - the topology (topology*.go): router, prefill and decode workers, the KV link
//     modelled by latency and bandwidth, and the server-side faults of the catalogue;
//   - the harness side (run.go and friends): the scenario's workloads (agents, open loop,
//     burst), the client's deadlines and outcome classification, the client-side faults,
//     and the ledger (events.jsonl, "mode": "sim"), from which the reports package
//     computes the verdict exactly as for a real run.
//
// Main loop:
//
//	loop := sim.NewLoop(sim.Epoch)
//	srv, _ := sim.NewTopology(loop, sc)       // refuses what it cannot model
//	// workloads schedule their first requests with loop.At(...)
//	loop.RunUntil(end)                        // every event, in time order, one goroutine
//
// Determinism: every random choice is drawn from generators seeded from the scenario's
// seed, events at the same instant run in the order they were scheduled, and ledger
// timestamps are Epoch plus virtual time, so one seed gives a byte-identical ledger.
package sim
