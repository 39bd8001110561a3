// Package phases holds the timed parts of a run that the runner (harness) and the
// simulator (sim) both carry out, written once over a Clock: the gauge sampler, the
// prefill-counter watch (pd_path), the health prober's bookkeeping (liveness and its
// last tries), the drain and the leak check; and the order in which a run starts
// (Start) and ends (End). The runner passes Wall (goroutines,
// tickers, the wall clock, its context); the simulator its event loop, where Sleep
// runs the loop forward and Every is a chain of timers. What each reading is (an HTTP
// scrape, a virtual gauge) stays with the caller; when and how often, and what the
// answers mean, are decided here.
//
//	clk := phases.Wall(ctx)
//	phases.Start{Samplers: func() { stop = phases.Sample(clk, every, procs, scrapeAll, led.Emit, warn) },
//		..., Open: ..., Faults: ..., Workloads: ..., Window: ...}.Run()
//	phases.End{Drain: ..., ..., StopSamplers: stop,
//		CheckLeaks: func() { v = phases.LeakCheck(clk, procs, scrapeAll, bound, poll) }, ...}.Run()
//
// It never imports the runner (internal/layering).
package phases
