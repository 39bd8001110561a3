package launcher

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Why the children get a GOMAXPROCS of their own: a topology is several Go processes
// (P prefill, D decode, the router) sharing the machine's CPUs. With the runtime's
// default every one of them has a P per CPU, so each goroutine hand-off on the request
// path (connection goroutine to engine loop, engine loop to handler, leg reader to relay)
// may wake another OS thread of the same process, and on a 2-CPU machine that is a
// futex wake-up and a context switch per hand-off. With its share of the CPUs, a
// process that gets one P hands off on its own thread (the runtime's runnext): on
// BenchmarkRouterLatency that halves the voluntary context switches per request (about
// 55 to 25 over the three processes) and cuts the system calls per request by about
// 40 % (futex 12-15 to 5-6 per process), while the CPU time per request at zero-compute
// load stays the same (BenchmarkRouterZeroTime: pd_cpu_us/req). docs/BENCHMARKS.md has
// the figures.

// GoMaxProcsEnv is the environment variable the Go runtime reads its GOMAXPROCS from.
const GoMaxProcsEnv = "GOMAXPROCS"

// ChildProcs is each of processes processes' share of cpus, at least 1.
func ChildProcs(cpus, processes int) int {
	if processes < 1 {
		processes = 1
	}
	return max(1, cpus/processes)
}

// goMaxProcsEnv is the GOMAXPROCS entry for the children's environment; ok is false
// when it is not to be set (Config.GoMaxProcs negative, or GOMAXPROCS already set by
// Config.Env or the launcher's own environment, which the children inherit).
func (t *Topology) goMaxProcsEnv() (string, bool) {
	n := t.cfg.GoMaxProcs
	if n < 0 || hasEnv(t.cfg.Env, GoMaxProcsEnv) {
		return "", false
	}
	if _, set := os.LookupEnv(GoMaxProcsEnv); set {
		return "", false
	}
	if n == 0 {
		// GOMAXPROCS(0), not NumCPU: it follows a container's CPU limit.
		n = ChildProcs(runtime.GOMAXPROCS(0), t.cfg.Prefill+t.cfg.Decode+1)
	}
	return GoMaxProcsEnv + "=" + strconv.Itoa(n), true
}

// hasEnv reports whether env sets key.
func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && k == key {
			return true
		}
	}
	return false
}
