package benchtable

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunLoadUnderLoad(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		load RunLoad
		want bool
	}{
		{"quiet", RunLoad{CPUs: 2, Before: 0.1, After: 1.9, OthersCPUs: 0.05}, false},
		// The benchmark's own threads raise the load average; the others' CPU decides.
		{"own load only", RunLoad{CPUs: 2, Before: 1.8, After: 3.5, OthersCPUs: 0.2}, false},
		{"others at the bound", RunLoad{CPUs: 2, Before: 0, After: 0, OthersCPUs: 0.5}, false},
		{"others above it", RunLoad{CPUs: 2, Before: 0, After: 0, OthersCPUs: 0.51}, true},
		{"others unknown: load average at the start", RunLoad{CPUs: 2, Before: 1.01, After: 0, OthersCPUs: nan}, true},
		{"others unknown, load average low", RunLoad{CPUs: 2, Before: 1, After: 4, OthersCPUs: nan}, false},
		{"nothing known", RunLoad{CPUs: 2, Before: nan, After: nan, OthersCPUs: nan}, false},
		{"CPUs unknown", RunLoad{Before: 9, OthersCPUs: 9}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.load.UnderLoad())
		})
	}
}

// TestParseLoadLines: the runner's lines give each result of their run its load, round
// trip through the log format, and a run without its after line gets none.
func TestParseLoadLines(t *testing.T) {
	l := RunLoad{CPUs: 2, Before: 0.94, After: 1.2, Wall: 27.125, OwnCPU: 12.5, OthersCPUs: 0.031}
	in := beforeLine(l.CPUs, l.Before) + "pkg: m\nBenchmarkX-2\t1\t5 q\nBenchmarkX-2\t1\t6 q\nok\tm\t1s\n" + afterLine(l) +
		beforeLine(2, math.NaN()) + "pkg: m\nBenchmarkY-2\t1\t7 q\nok\tm\t1s\n" +
		afterLine(RunLoad{After: math.NaN(), OthersCPUs: math.NaN()}) +
		beforeLine(2, 3) + "pkg: m\nBenchmarkZ-2\t1\t8 q\n" // killed: no after line
	out, err := Parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, out.Results, 4)
	require.Equal(t, &l, out.Results[0].Load)
	require.Equal(t, &l, out.Results[1].Load)
	y := out.Results[2].Load
	require.NotNil(t, y)
	require.Equal(t, 2, y.CPUs)
	require.True(t, math.IsNaN(y.Before) && math.IsNaN(y.After) && math.IsNaN(y.OthersCPUs), "%+v", *y)
	require.Nil(t, out.Results[3].Load)
}

func TestMachineLoadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	require.Equal(t, 0.94, loadAvg1(write("loadavg", "0.94 1.12 1.36 1/167 13060\n")))
	require.True(t, math.IsNaN(loadAvg1(write("empty", ""))))
	require.True(t, math.IsNaN(loadAvg1(filepath.Join(dir, "none"))))

	// user nice system idle iowait irq softirq steal: busy is user+nice+system+irq+softirq.
	busy, ok := busySeconds(write("stat", "cpu  1000 10 200 5000 30 5 15 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"))
	require.True(t, ok)
	require.InDelta(t, 12.30, busy, 1e-9)
	_, ok = busySeconds(write("bad", "intr 1 2 3\n"))
	require.False(t, ok)

	// 4 s of busy time over 2 s, 3 s of it ours: the others used half a CPU.
	require.InDelta(t, 0.5, othersCPUs(10, 14, true, 3, 2*time.Second), 1e-9)
	require.Equal(t, 0.0, othersCPUs(10, 11, true, 3, 2*time.Second), "never below zero")
	require.True(t, math.IsNaN(othersCPUs(10, 14, false, 3, 2*time.Second)))

	// The real files, where there are some.
	if _, err := os.Stat("/proc/stat"); err == nil {
		_, ok := busySeconds("/proc/stat")
		require.True(t, ok)
		require.False(t, math.IsNaN(loadAvg1("/proc/loadavg")))
	}
}
