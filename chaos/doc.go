// Package chaos breaks things on a schedule and proves that it did. A fault is
// {name, type, target, at, for, params} (scenarios.Fault); its type is registered here by
// name, one file per type (toxiproxy's toxics), and implements Fault: Apply, Verify
// (prove it took effect), Revert.
//
// Mechanisms, all reached through the Env interface that the harness implements over the
// launcher topology:
//   - failpoints inside server processes (server/failpoint admin API, token-protected):
//     kv_transfer_stall, kv_transfer_drop, kv_transfer_corrupt, bootstrap_stall,
//     scheduler_stall, failpoint; verified by hit counts read back over the API;
//   - a TCP fault proxy on each link (chaos/netproxy over toxiproxy): network_latency,
//     bandwidth_limit, connection_reset, network_toxic, network_partition; verified by
//     live byte counters (bytes of the toxic's own stream, upstream or downstream,
//     crossed it after it was added; new connections and the other direction's bytes
//     do not count) or by a refused dial (partition);
//   - signals to supervised processes: prefill_crash, decode_crash, process_kill
//     (SIGKILL, restart on revert), process_pause (SIGSTOP/SIGCONT), process_restart;
//     verified from /proc/<pid>/stat and, for a kill or a pause of a process whose HTTP
//     server is known (Process.URL), by probing that server: a kill needs it to refuse
//     connections or fail the request, a pause needs a GET to get no response within
//     ServerProbeTimeout, or what is left of the Verify's deadline (a stopped process's
//     kernel still accepts connections, so only a response counts). The pid alone is
//     not proof: the server may run outside the signalled process group (`docker run`'s
//     container, a launcher that calls setsid) and keep serving. With no URL, or one that
//     gave no answer before the signal, the proof is /proc's alone, and the evidence says
//     the server was not probed;
//   - load: queue_saturation, kv_pool_exhaustion (bursts; verified by refusals, by the
//     target's waiting-queue gauge or KV usage and retractions, and queue_saturation
//     also by a stream of a burst sent at once served to its end while another waited
//     for its first token; never by the PD queues every request passes through,
//     metricnames.TransitQueues) and client_disconnect (client cancels after k tokens;
//     verified by the cancel count).
//
// A fault that does not take effect within the verify timeout fails the run with
// ErrNotVerified (exit 3): a silent no-op must never look like a pass.
//
// Scenario validation uses the registry without importing this package's runtime:
//
//	sc.Validate(scenarios.WithFaultTypes(chaos.FaultTypes()))
//
// The main loop (the harness runner):
//
//	tl, err := chaos.NewTimeline(sc.Faults)        // every bad spec reported at once
//	...
//	go func() { faultErr <- tl.Run(loadCtx, env, loadStart) }()
//	// Run: for each step in time order —
//	//   apply:  fault.Apply → emit fault_start → poll fault.Verify → emit fault_verified
//	//   revert: fault.Revert → emit fault_stop
//	// and on failure or when loadCtx ends: RevertAll (latest first).
//	...
//	if err := <-faultErr; err != nil { exit 3 }
//
// Those rules live once, in Sequencer: a state machine that acts through a Runtime
// (clock, timers, the calls, events). Timeline.Run is its driver on goroutines and the
// wall clock; the simulator (package sim) drives the same Sequencer on its event loop,
// and runs the same faults against a simulated Env (ProcStater for process states,
// ServerProber for its servers' answers, a Link that is a Dialer for a partition's proof).
package chaos
