// Package sim runs a scenario's whole PD topology and its workloads in one goroutine on a
// virtual clock (`harness run --sim`). Nothing here has a second copy of the serving
// decisions: the workers are the real server/scheduler state machines and the router's
// choices come from server/router's pure functions; the simulator replaces only the
// drivers — goroutines, sockets and the wall clock become one event queue (Loop). The
// drivers' own rules are the real packages' too: router.Flow, router.WorkerState and
// router.HealthChecks (routing, health, the check rounds),
// server/engine's Core (the engine loop itself: iterations, ticks, bootstrap retry, held
// and timed steps, publishing) and rules.go (request aging, throughput, StatGauges),
// server/kvtransfer's room machines (RecvRooms, SendRooms: the KV room protocol, step
// bounds, tombstones), chaos.Sequencer (the fault timeline itself, driven on the loop)
// and chaos's faults (applied, proved and reverted on the model through a chaos.Env),
// chaos/client_rules.go (client_disconnect), harness/phases (sampler, pd_path watch,
// prober bookkeeping, drain, leak check, on the loop as a phases.Clock; phases.Start and
// phases.End, the order of a run's start and end), harness/workload.Extras,
// ClientFaults and Tally (a client-side fault's extra requests, disconnect rule and
// statistics),
// chaos.CheckTarget (a fault's roles, refused up front), failpoint.Tally and
// failpoint.State (a failpoint's status: evaluations, hits, callers held, the counts a
// Disable keeps), phases.Health and target.EntryHealth (the entry's health events,
// its /health answered as api.HealthStatus), router.Up (the health gauges), api.StampDeadline
// (--request-timeout, stamped by the simulated router when it runs), scheduler.WatchdogErr (/health's watchdog) and harness/judge
// (leak verdict, self-check, server_debug reports, what an interrupt leaves in flight). sim never imports the runner
// (pdsoak/harness).
//
// Two halves meet at the Server interface (server.go):
//
//   - the topology: topology.go builds it from the scenario's reference section;
//     worker.go runs the real engine.Core per worker and supplies its IO (engine.Host);
//     router.go is the IO of server/router.Flow, the real router's request state
//     machine, built by router.NewCore from the router's options at start and at every
//     restart (router_health.go: the checks router.HealthChecks schedules); link.go and link_kv.go
//     carry messages with latency and bandwidth (link_kv.go: kvtransfer's room
//     machines on the simulated KV connection, KV pages with their checksums);
//     faults.go gives chaos's server-side faults the model's mechanisms (FaultEnv);
//     proc.go is the process model the worker and the router embed (incarnation,
//     SIGSTOP, the events that wait);
//   - the harness side: run.go follows the real runner's phases and writes the ledger
//     (events.jsonl, "mode": "sim"), from which the reports package computes the verdict
//     exactly as for a real run; workload.go drives harness/workload's decisions
//     (workload.Session, Burst.Requests, Probe.Round, Trace.Arrivals, Schedule) on the
//     clock; client.go is both ends of the HTTP exchange: the front end's answer from
//     server/api's Answer state machine (what the handler writes, api.Out) and the real
//     client's Answer state machine reading it, with the deadlines as timers;
//     run_faults.go drives chaos.Sequencer and the client-side faults.
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
