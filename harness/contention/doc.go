// Package contention measures how busy the machine under the harness is while a run
// goes, so that compare can tell a slow server from a busy runner ("inconclusive")
// instead of calling a regression.
//
// Every window (the run's sample interval) the Sampler reads /proc/pressure/cpu (the
// share of time some runnable task waited for a CPU, where the kernel has PSI),
// /proc/stat (the steal share of all CPUs' time and the runnable tasks per CPU), the
// harness's own CPU time (getrusage), how late its own ticker fired, and how long its
// threads waited for a CPU each time they became runnable (/proc/self/task/*/schedstat:
// the one figure that sees a machine delaying every wake-up a little), and emits one
// ledger sample event with Source ledger.ContentionSource and the
// ledger.Contention* metrics. Parsing is pure (ParsePressure, ParseStat) and the
// window's figures are a pure function of two readings (Window); the Sampler is the
// driver that owns the ticker and the files.
//
// Main loop (the harness's runner, for the load phase):
//
//	s := contention.New(led.Emit, contention.WithInterval(2*time.Second))
//	go s.Run(ctx)        // one sample per window until ctx ends, then a last one
//
// A machine without /proc (not Linux) gives samples with only the harness's CPU and
// tick lag; nothing here ever fails a run.
package contention
