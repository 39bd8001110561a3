// Package harness runs a scenario against an OpenAI-compatible endpoint and writes the
// ledger (events.jsonl) from which every report is computed.
//
// Run starts the embedded reference PD topology (or reaches target.url), drives the
// workloads (harness/workload) through the classifying client (harness/client), runs
// the fault timeline through a FaultRunner seam, and then drains: in-flight requests
// get a bounded time to resolve, the target's running/queued gauges must return to 0
// within a bound (the leak check), and the harness checks its own scheduling lag (a
// run where the harness was the bottleneck is invalid). Every request ends in exactly
// one done event with one outcome; a silent drop (stalled, deadline_exceeded) carries
// what the server's /debug/requests said about it just before the harness gave up.
//
// Main loop (Run):
//
//	ledger := open(OutDir/events.jsonl)
//	target := startEmbedded(...) or openExternal(...)   // ErrInfrastructure on failure
//	go sampler(target.MetricsSources())                  // sample events
//	go faults(faultCtx, env)                             // fault_start / fault_stop events
//	for each workload: go w.Run(loadCtx, t0, executor)   // scheduled … done events
//	wait(load window) → drain(bounded) → cancel leftovers → drain event
//	stop faults → leak check → self-check → stop target → run_end
//
// Nothing here judges the run: the reports package computes the verdict from the
// ledger. Run's error is only for runs that could not be judged (ErrInfrastructure).
package harness
