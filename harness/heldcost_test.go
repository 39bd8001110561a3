package harness

import (
	"math"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What one harness process may spend on held streams, by which BenchmarkHeldStreams
// states the count its measured per-stream cost allows where the descriptor limit stops
// it from opening them all: one CPU (half of the 2-core box the goal is set on; the other
// half runs the target) and 1 GiB (a twentieth of this machine's memory).
const (
	heldCPUBudget    = 1.0     // CPUs
	heldMemoryBudget = 1 << 30 // bytes
)

// heldCost is the per-stream cost of holding streams, measured while holding Streams.
type heldCost struct {
	Streams        int
	CPUPerStreamS  float64 // CPU seconds per held stream per second (tokens in, timers, GC)
	BytesPerStream float64 // heap + goroutine stacks after GC, per held stream
}

// ceiling is the stream count at which the cost reaches the budgets, and which budget
// that is ("cpu" or "memory"). A cost that cannot be measured (zero or less) gives no
// bound from that budget; with neither, the ceiling is 0: no claim.
func (c heldCost) ceiling(cpuBudget, memBudget float64) (float64, string) {
	n, by := math.Inf(1), ""
	if c.CPUPerStreamS > 0 {
		n, by = cpuBudget/c.CPUPerStreamS, "cpu"
	}
	if c.BytesPerStream > 0 && memBudget/c.BytesPerStream < n {
		n, by = memBudget/c.BytesPerStream, "memory"
	}
	if by == "" {
		return 0, ""
	}
	return math.Round(n), by
}

// heldStreamsFigure is held_streams: the streams held when the process could open all it
// was asked to; else (the descriptor limit stopped it at held) the ceiling its measured
// per-stream cost implies, and never more than that ceiling in either case (a cost beyond
// the budget caps even streams that were held).
func heldStreamsFigure(want, held int, limited bool, ceiling float64) float64 {
	if !limited {
		return math.Min(float64(held), ceiling)
	}
	if held < want*9/10 {
		// Too far from the goal to stand for it: a limit this low says nothing of 20,000.
		return float64(held)
	}
	return ceiling
}

func TestHeldStreamsFigure(t *testing.T) {
	tests := []struct {
		name    string
		want    int
		held    int
		limited bool
		cost    heldCost
		figure  float64
		by      string
	}{
		// 19,600 held at 20 µs of CPU per stream-second and 12 KB: 1 CPU allows 50,000,
		// 1 GiB 87,381; the CPU decides.
		{"limited, cheap streams", 20000, 19600, true, heldCost{19600, 20e-6, 12288}, 50000, "cpu"},
		// Four times the CPU per stream: 12,500, a MISS although 19,600 were held.
		{"limited, CPU-heavy streams", 20000, 19600, true, heldCost{19600, 80e-6, 12288}, 12500, "cpu"},
		// 64 KB per stream: 1 GiB holds 16,384.
		{"limited, memory-heavy streams", 20000, 19600, true, heldCost{19600, 20e-6, 65536}, 16384, "memory"},
		{"not limited: the count held", 20000, 20000, false, heldCost{20000, 20e-6, 12288}, 20000, "cpu"},
		{"not limited, some failed to open", 20000, 19990, false, heldCost{19990, 20e-6, 12288}, 19990, "cpu"},
		{"not limited, over budget", 20000, 20000, false, heldCost{20000, 80e-6, 12288}, 12500, "cpu"},
		{"limit far below the goal", 20000, 900, true, heldCost{900, 20e-6, 12288}, 900, "cpu"},
		{"nothing measured", 20000, 19600, true, heldCost{19600, 0, 0}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, by := tc.cost.ceiling(heldCPUBudget, heldMemoryBudget)
			require.Equal(t, tc.by, by)
			require.Equal(t, tc.figure, heldStreamsFigure(tc.want, tc.held, tc.limited, c))
		})
	}
}

// processCPU is this process's CPU time, user + system (its children not included: the
// hold server runs in one).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openFiles is how many descriptors this process has open (-1 where /proc is not there).
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
