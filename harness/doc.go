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
// Main loop (Run, then runner.run: one method per phase, each writing its own events):
//
//	ledger := open(OutDir/events.jsonl); gpu.Open()
//	announce()        // run_start (provenance), a note per Options.Notes, GPU telemetry line (+ note)
//	prepare()         // build workloads and the fault timeline: a bad spec fails before anything starts
//	startTarget()     // startLaunched | startEmbedded | openExternal; ErrInfrastructure on failure
//	describeTarget()  // target event: /v1/models, server version (optional, bounded)
//	startExecutor()   // client, debug probe, lag recorder
//	newBundles()      // forensics: the first silent drop writes forensics/first-drop-<s> (async)
//	phases.Start{}    // the start's order, shared with the simulator:
//	  startSamplers()   // metrics and GPU sample events, self-check ticker
//	  startPDWatch()    // pd_counter events (pd_path)
//	  startWedgeWatch() // forensics.wedged_after: a wedged run writes forensics/wedged-<s> (async)
//	  startProbes()     // liveness (target_down/up) and the entry's health events
//	  openLoad()        // t0, "load started"
//	  startFaults()     // go faults(faultCtx, sc, chaosEnv, t0)
//	  startWorkloads()  // go w.Run(ctx, t0, executor) per workload
//	  waitLoad()        // the load window: scheduled … done events, fault_* events
//	phases.End{}      // the end's order, shared with the simulator:
//	  drain()           // bounded wait, then cancel leftovers: drain event
//	  stopFaults()      // revert everything, bounded (after the watches; then the last probes, the samplers)
//	  checkLeaks()      // leak_check: passed, failed, or not evaluated (Passed absent) and why
//	  selfCheck()       // self_check: a late harness makes the run invalid
//	failures()        // drops, refused responses, drain or leak failure, errors: forensics/end
//	bundles.wait()    // deferred, before stopTarget: bundles read the live processes
//	stopTarget()      // deferred; run_end carries Error and, after Ctrl-C, Interrupted
//
// Timings (sample interval, drain after Ctrl-C, self-check tick, …) are Options fields
// whose zero value takes the Default* constant.
//
// Nothing here judges the run: the reports package computes the verdict from the
// ledger alone (an interrupted run says so in run_end). Run's error is only for runs
// that could not be judged (ErrInfrastructure) or bad input (a fault spec the chaos
// registry rejects).
package harness
