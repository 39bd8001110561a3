package ledger

// ContentionSource is the Source of a sample event that measures the machine the harness
// runs on, not the target (harness/contention): one per window, with the Contention*
// metrics below. reports reads them to tell a busy runner from a slow server.
const ContentionSource = "contention"

// Metrics of a contention sample. Fractions are of the window's wall time (pressure), of
// all CPUs' time (steal), or CPUs (run queue, harness CPU); a metric the machine cannot
// give (no /proc/pressure) is absent.
const (
	// ContentionCPUPressure: share of the window in which some runnable task waited for
	// a CPU (/proc/pressure/cpu "some").
	ContentionCPUPressure = "contention_cpu_pressure"
	// ContentionSteal: share of all CPUs' time the hypervisor gave to other guests.
	ContentionSteal = "contention_steal"
	// ContentionRunQueue: runnable tasks per CPU at the end of the window (procs_running).
	ContentionRunQueue = "contention_run_queue"
	// ContentionHarnessCPU: CPUs the harness process itself used over the window.
	ContentionHarnessCPU = "contention_harness_cpu"
	// ContentionTickLag: how late the sampler's own ticker fired, in seconds: the
	// harness's scheduling lag as the Go runtime saw it.
	ContentionTickLag = "contention_tick_lag"
	// ContentionRunDelay: how long, on average, one of the harness's threads that became
	// runnable waited for a CPU before it ran, in seconds (Linux schedstat: run-queue
	// wait over timeslices, summed over the process's threads). A request's latency is a
	// chain of such wake-ups, in the harness and in a target on the same machine, so a
	// machine that delays each one by a millisecond moves every percentile; one tick per
	// window (the tick lag) cannot see that.
	ContentionRunDelay = "contention_run_delay"
)
