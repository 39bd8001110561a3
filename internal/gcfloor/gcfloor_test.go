package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name  string
		live  uint64
		floor uint64
		base  int
		want  int
	}{
		{"small heap: goal raised to the floor", 2 * mib, 64 * mib, 100, 3100},      // 2 MiB × 32 = 64 MiB
		{"rounds up: the goal is at least the floor", 3 * mib, 64 * mib, 100, 2034}, // 3 × 21.34 ≥ 64
		{"half the floor: base reaches it", 32 * mib, 64 * mib, 100, 100},           // 32 × 2 = 64
		{"large heap: base", 460 * mib, 64 * mib, 100, 100},                         // held streams
		{"higher base kept", 16 * mib, 64 * mib, 400, 400},                          // 16 × 5 = 80 ≥ 64
		{"lower base raised", 16 * mib, 64 * mib, 50, 300},                          // 16 × 4 = 64
		{"tiny heap: capped", 1024, 64 * mib, 100, MaxPercent},                      //
		{"live unknown", 0, 64 * mib, 100, MaxPercent},                              //
		{"GC off stays off", 2 * mib, 64 * mib, -1, -1},                             //
		{"no floor", 2 * mib, 0, 100, 100},                                          //
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Percent(tc.live, tc.floor, tc.base)
			require.Equal(t, tc.want, got)
			if tc.base >= 0 && tc.live > 0 && got < MaxPercent {
				require.GreaterOrEqual(t, tc.live*uint64(100+got), tc.floor*100, "the goal reaches the floor")
			}
		})
	}
}

var sink []byte

// gogc reads GOGC without changing it.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// churn allocates n bytes of garbage in 32 KiB pieces and returns how many GC cycles
// ran meanwhile.
func churn(n int) uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n/(32<<10); i++ {
		sink = make([]byte, 32<<10)
	}
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

// TestFloorCycles: 48 MiB of garbage on a small heap is many cycles with GOGC=100 (a 4
// MiB goal) and at most one with a 64 MiB floor; stop gives GOGC back. Counts of cycles,
// not times: they do not move with the machine's load.
func TestFloorCycles(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	without := churn(48 << 20)
	runtime.GC()
	stop := New().Start()
	with := churn(48 << 20)
	require.Greater(t, gogc(), 100, "the floor raised GOGC")
	stop()
	require.Equal(t, 100, gogc(), "stop gives the base back")
	t.Logf("GC cycles over 48 MiB of garbage: %d without the floor, %d with", without, with)
	// Without, the goal is 4 MiB: a dozen cycles, fewer when a concurrent mark keeps
	// what was allocated during it. With it, 64 MiB: none.
	require.GreaterOrEqual(t, without, uint32(3))
	require.LessOrEqual(t, with, uint32(1))

	// The cleanup armed last runs after stop and leaves GOGC alone.
	runtime.GC()
	runtime.GC()
	require.Equal(t, 100, gogc())
}

func TestFloorGCOff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	stop := New().Start()
	require.Equal(t, -1, gogc(), "GC off stays off")
	stop()
	require.Equal(t, -1, gogc())
}

// TestFloorOverlapping: two runs in one process, started and stopped in any order, give
// back the GOGC from before the first (one setting per process).
func TestFloorOverlapping(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	a := New(WithFloor(16 << 20)).Start()
	low := gogc()
	b := New(WithFloor(256 << 20)).Start()
	require.Greater(t, gogc(), low, "the larger floor wins")
	a()
	a() // idempotent
	require.Greater(t, gogc(), low, "b still holds its floor")
	b()
	require.Equal(t, 100, gogc())
	runtime.GC()
	runtime.GC()
	require.Equal(t, 100, gogc(), "the cleanup left armed does nothing")
}
