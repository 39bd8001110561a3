// Package gcfloor keeps the Go garbage collector from running every few megabytes
// while a process's heap is small: it raises GOGC so that the heap goal is at least a
// floor (DefaultFloor, 64 MiB), and gives the base GOGC back as soon as the live heap is
// large enough for the base to reach the floor by itself.
//
// Why: Go's heap goal is the live heap times (1 + GOGC/100), and no less than 4 MiB. A
// harness that starts a burst of 1,000 streams with a 2 MiB heap allocates through that
// goal many times over in a few hundred milliseconds; each cycle's mark phase takes a
// whole P for its dedicated worker (a quarter of GOMAXPROCS, rounded: one of two), so
// the burst's requests wait for half the CPUs (BenchmarkBurst1000 saw 9 cycles in 300
// ms, one with a 60 ms mark). With a floor the same burst runs with none or one, and a
// process whose live heap is above half the floor behaves exactly as with the base GOGC.
//
// The main loop is a cleanup re-armed on every cycle:
//
//	f := gcfloor.New(gcfloor.WithFloor(64 << 20))
//	stop := f.Start() // GOGC = Percent(live heap, floor, base) now, and after every GC
//	defer stop()      // the base GOGC again
//
// Percent is the pure decision; Floor is its driver.
package gcfloor
