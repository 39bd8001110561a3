// Package harness runs a scenario against an OpenAI-compatible endpoint and writes the
// ledger (events.jsonl) from which every report is computed.
//
// Run gets a target (package harness/target) — the embedded reference PD topology through server/launcher (or a
// colocated process), the processes of target.launch started and supervised in their
// own process groups, or an external target.url — drives the workloads
// (harness/workload) through the classifying client (harness/client), runs the fault
// timeline (the chaos package's Timeline over a chaos.Env built here), and then drains:
// in-flight requests get a bounded time to resolve, the target's running/queued gauges
// must return to 0 within a bound (the leak check), and the harness checks its own
// scheduling lag (a run where the harness was the bottleneck is invalid). Every request
// ends in exactly one done event with one outcome; a silent drop (stalled,
// deadline_exceeded) carries what the router's and every worker's /debug/requests said
// about it just before the harness gave up on it.
//
// Main loop (Run):
//
//	ledger := open(OutDir/events.jsonl)                        // run_start
//	target := startLaunched | startEmbedded | openExternal     // ErrInfrastructure on failure
//	go sampler(target.MetricsSources())                        // sample events
//	go gpuSampler(gpu.Open())                                  // GPU sample events, when NVML finds GPUs
//	go faults(faultCtx, sc, chaosEnv, t0)                      // fault_start/verified/stop
//	for each workload: go w.Run(ctx, t0, executor)             // scheduled … done events
//	wait(load window) → drain(bounded) → cancel leftovers      // drain event
//	stop faults → leak check → self-check → stop target        // leak_check, self_check, run_end
//
// Nothing here judges the run: the reports package computes the verdict from the
// ledger. Run's error is only for runs that could not be judged (ErrInfrastructure) or
// bad input (a fault spec the chaos registry rejects).
package harness
