// Package phases holds the timed parts of a run that the runner (harness) and the
// simulator (sim) both carry out, written once over a Clock: the gauge sampler, the
// prefill-counter watch (pd_path), the health prober's bookkeeping (liveness and its
// last tries), the drain and the leak check. The runner passes Wall (goroutines,
// tickers, the wall clock, its context); the simulator its event loop, where Sleep
// runs the loop forward and Every is a chain of timers. What each reading is (an HTTP
// scrape, a virtual gauge) stays with the caller; when and how often, and what the
// answers mean, are decided here.
//
//	clk := phases.Wall(ctx)
//	stop := phases.Sample(clk, every, procs, scrapeAll, led.Emit, warn)
//	... load ...
//	stop()
//	v := phases.LeakCheck(clk, procs, scrapeAll, bound, poll)
//
// It never imports the runner (internal/layering).
package phases
