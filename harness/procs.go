package harness

import "runtime"

// setProcs sets GOMAXPROCS to n for a run (Options.Procs; n <= 0: leaves it) and returns
// what puts it back. One P cut the harness's send lag tail with ~20,000 streams held: with
// two, every token read that readies a goroutine wakes a second thread to spin for it,
// and those threads double the harness's wait for a CPU (docs/BENCHMARKS.md, "Held
// streams, fourth pass"). Not the default yet: see there.
func setProcs(n int) (restore func()) {
	if n <= 0 {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(n)
	return func() { runtime.GOMAXPROCS(prev) }
}
