// Package sim runs a scenario's whole PD topology and its workloads in one goroutine on a
// virtual clock (`harness run --sim`). Nothing here has a second copy of the serving
// decisions: the workers are the real server/scheduler state machines and the router's
// choices come from server/router's pure functions; the simulator replaces only the
// drivers — goroutines, sockets and the wall clock become one event queue (Loop). The
// drivers' own rules are the real packages' too: router.Health (health tracking),
// server/engine/rules.go (bootstrap retry, request aging, throughput, StatGauges),
// server/kvtransfer's room machines (RecvRooms, SendRooms: the KV room protocol,
// step bounds, tombstones), chaos/schedule.go and
// chaos/client_rules.go (fault timeline, verify bound, client_disconnect), and
// harness/judge (leak verdict, self-check, server_debug reports). sim never imports the
// runner (pdsoak/harness).
//
// Two halves meet at the Server interface (server.go):
//
//   - the topology: topology.go builds it from the scenario's reference section;
//     worker.go drives a real scheduler per worker as server/engine's loop does;
//     router.go is the router on server/router's pure decisions (router_health.go its
//     health checks through router.Health); link.go and link_kv.go
//     carry messages with latency and bandwidth (link_kv.go: kvtransfer's room
//     machines on the simulated KV connection, KV pages with their checksums);
//     faults.go maps the catalogue's server-side faults onto them;
//   - the harness side: run.go follows the real runner's phases and writes the ledger
//     (events.jsonl, "mode": "sim"), from which the reports package computes the verdict
//     exactly as for a real run; workload.go drives harness/workload's decisions
//     (workload.Session, Burst.Requests, Probe.Round, Trace.Arrivals, Schedule) on the
//     clock; client.go is both ends of the HTTP exchange: the front end's answer from
//     server/api's Answer state machine (what the handler writes, api.Out) and the real
//     client's Answer state machine reading it, with the deadlines as timers; run_faults.go runs the fault
//     timeline and the client-side faults.
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
