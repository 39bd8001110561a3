package benchtable

import (
	"bytes"
	"flag"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sample is go test output for the benchmarks of testBenchmarks and more, with the
// runner's load lines: three runs of BenchmarkTransfer (one with others busy, one whose
// others' CPU is unknown with a high load average at its start), two of
// BenchmarkOpenLoopMaxRate, and a BenchmarkBurst1000 that passed once and failed once.
const sample = `goos: linux
goarch: amd64
benchtable: before cpus=2 loadavg=0.1
pkg: m/server/kvtransfer
cpu: Intel(R) Xeon(R) Processor
BenchmarkTransfer-2   	     284	   7902351 ns/op	         0.8259 kv/raw
PASS
ok  	m/server/kvtransfer	9.0s
benchtable: after loadavg=0.9 wall_s=9.5 cpu_s=15 others_cpus=0.02
benchtable: before cpus=2 loadavg=0.5
pkg: m/server/kvtransfer
BenchmarkTransfer-2   	     280	   7902351 ns/op	         0.7000 kv/raw
ok  	m/server/kvtransfer	9.0s
benchtable: after loadavg=2.5 wall_s=9.5 cpu_s=12 others_cpus=0.9
benchtable: before cpus=2 loadavg=1.5
pkg: m/server/kvtransfer
BenchmarkTransfer-2   	     281	   7902351 ns/op	         0.8400 kv/raw
ok  	m/server/kvtransfer	9.0s
benchtable: after loadavg=1.7 wall_s=9.5 cpu_s=12 others_cpus=?
pkg: m/harness
BenchmarkOpenLoopMaxRate-2	1	100 ns/op	0.81 ratio	0.97 ratio_64_workers	4000 harness_req/s
BenchmarkOpenLoopMaxRate-2	1	100 ns/op	1.3 ratio	0.93 ratio_64_workers	4200 harness_req/s
BenchmarkMemoryPerInFlight-2	1	100 ns/op	11000 heap-bytes/req
BenchmarkBurst1000-2	1	100 ns/op	1000 ok
--- FAIL: BenchmarkBurst1000
    bench_test.go:90: only 998 of 1000 ok
--- SKIP: BenchmarkHeldStreams
    bench_test.go:12: ulimit -n is 1024
FAIL
FAIL	m/harness	20.0s
# m/server/launcher [m/server/launcher.test]
server/launcher/bench_test.go:3:2: undefined: nope
FAIL	m/server/launcher [build failed]
pkg: m/sim
BenchmarkSimSpeedup-2	1	100 ns/op	2600 sim_speedup
ok  	m/sim	3.0s
`

var testBenchmarks = []Benchmark{
	{Package: "./server/kvtransfer", Name: "BenchmarkTransfer", BenchTime: "2s", Figures: []Figure{
		{What: "KV ÷ raw", Metric: "kv/raw", Goal: AtLeast(0.8)},
	}},
	{Package: "./harness", Name: "BenchmarkOpenLoopMaxRate", BenchTime: "1x", Figures: []Figure{
		{What: "harness ÷ vegeta, 64 workers", Metric: "ratio_64_workers", Goal: AtLeast(0.95)},
		{What: "harness ÷ vegeta", Metric: "ratio", Goal: Info()},
		{What: "harness rate", Metric: "harness_req/s", Goal: AtLeast(1000)},
	}},
	{Package: "./harness", Name: "BenchmarkMemoryPerInFlight", BenchTime: "1x", Figures: []Figure{
		{What: "memory | per stream", Metric: "bytes/in-flight-request", Goal: AtMost(12288)},
	}},
	{Package: "./harness", Name: "BenchmarkBurst1000", BenchTime: "1x", Figures: []Figure{
		{What: "burst ok", Metric: "ok", Goal: AtLeast(1000)},
	}},
	{Package: "./harness", Name: "BenchmarkHeldStreams", BenchTime: "1x", Figures: []Figure{
		{What: "held", Metric: "held_streams", Goal: AtLeast(20000)},
	}},
	{Package: "./server/launcher", Name: "BenchmarkRouterLatency", BenchTime: "1x", Figures: []Figure{
		{What: "p50", Metric: "added_p50_ms", Goal: AtMost(0.2)},
	}},
	{Package: "./sim", Name: "BenchmarkSimSpeedup", BenchTime: "1x", Figures: []Figure{
		{What: "speedup", Metric: "sim_speedup", Goal: AtLeast(500)},
	}},
	{Package: "./sim", Name: "BenchmarkAbsent", BenchTime: "1x", Figures: []Figure{
		{What: "absent", Metric: "x", Goal: AtLeast(1)},
	}},
}

// sampleOutput is the sample parsed, with the runner's record of a second run of
// BenchmarkSimSpeedup that the budget left out.
func sampleOutput(t *testing.T) *Output {
	out, err := Parse(strings.NewReader(sample))
	require.NoError(t, err)
	out.Failures = append(out.Failures, Failure{Package: "m/sim", Name: "BenchmarkSimSpeedup", NotRun: true,
		Reason: "the run's time budget (10m0s) was spent"})
	return out
}

func TestEvaluate(t *testing.T) {
	rows := Evaluate(testBenchmarks, sampleOutput(t), "m")
	type want struct {
		metric         string
		value          float64
		min, max       float64
		runs           int
		loads          int // runs with a known load
		underLoad      int
		notRun         int
		pass, measured bool
		reason         string
	}
	wants := []want{
		// The median of 0.70, 0.8259, 0.84; the second run had others busy, the third a
		// load average above 1 at its start and no /proc/stat figure.
		{"kv/raw", 0.8259, 0.7, 0.84, 3, 3, 2, 0, true, true, ""},
		// Two runs: the mean of the middle two.
		{"ratio_64_workers", 0.95, 0.93, 0.97, 2, 0, 0, 0, true, true, ""},
		{"ratio", 1.055, 0.81, 1.3, 2, 0, 0, 0, false, true, ""}, // info: never PASS
		{"harness_req/s", 4100, 4000, 4200, 2, 0, 0, 0, true, true, ""},
		{"bytes/in-flight-request", 0, 0, 0, 0, 0, 0, 0, false, false, `benchmark did not report "bytes/in-flight-request" (it reported heap-bytes/req, ns/op)`},
		// One run met the goal, the other failed: a MISS, with the one value shown.
		{"ok", 1000, 1000, 1000, 1, 0, 0, 0, false, true, "failed: bench_test.go:90: only 998 of 1000 ok"},
		{"held_streams", 0, 0, 0, 0, 0, 0, 0, false, false, "skipped: bench_test.go:12: ulimit -n is 1024"},
		{"added_p50_ms", 0, 0, 0, 0, 0, 0, 0, false, false, "package failed: build failed: server/launcher/bench_test.go:3:2: undefined: nope"},
		// A run the budget left out does not count against the one that ran.
		{"sim_speedup", 2600, 2600, 2600, 1, 0, 0, 1, true, true, ""},
		{"x", 0, 0, 0, 0, 0, 0, 0, false, false, "not run: benchmark not found"},
	}
	require.Len(t, rows, len(wants))
	for i, w := range wants {
		t.Run(w.metric, func(t *testing.T) {
			r := rows[i]
			require.Equal(t, w.metric, r.Figure.Metric)
			require.Equal(t, w.reason, r.Reason)
			require.Equal(t, w.measured, r.Measured)
			require.InDelta(t, w.value, r.Value, 1e-9)
			require.Equal(t, w.min, r.Min)
			require.Equal(t, w.max, r.Max)
			require.Equal(t, w.runs, r.Runs)
			require.Len(t, r.Loads, w.loads)
			require.Equal(t, w.underLoad, r.UnderLoad)
			require.Equal(t, w.notRun, r.NotRun)
			require.Equal(t, w.pass, r.Pass)
		})
	}
	require.Equal(t, "4 of 9 figures meet their goal. 1 for information only. 1 measured under load in at least one run.", Summary(rows))
}

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"one", []float64{3}, 3},
		{"odd, unsorted", []float64{5, 1, 3}, 3},
		{"even: mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"an outlier does not move it", []float64{1, 1.1, 1000}, 1.1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			require.Equal(t, tc.want, median(tc.in))
			require.Equal(t, in, tc.in, "median sorts a copy")
		})
	}
}

func TestGoal(t *testing.T) {
	tests := []struct {
		name string
		goal Goal
		v    float64
		met  bool
		text string
	}{
		{"at least, above", AtLeast(0.8), 0.81, true, "≥ 0.8"},
		{"at least, equal", AtLeast(0.8), 0.8, true, "≥ 0.8"},
		{"at least, below", AtLeast(0.8), 0.79, false, "≥ 0.8"},
		{"at most, below", AtMost(12288), 11000, true, "≤ 12288"},
		{"at most, above", AtMost(1), 1.01, false, "≤ 1"},
		{"NaN never", AtLeast(0), math.NaN(), false, "≥ 0"},
		{"NaN never, at most", AtMost(5), math.NaN(), false, "≤ 5"},
		{"info is never met", Info(), 1, false, "info"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.met, tc.goal.Met(tc.v))
			require.Equal(t, tc.text, tc.goal.String())
		})
	}
}

func TestFormatValue(t *testing.T) {
	for in, want := range map[float64]string{0.82591: "0.8259", 12.345: "12.35", 11234.4: "11234", 0.2: "0.2",
		5000: "5000", 0.000015: "1.5e-05", 999.96: "1000", -3: "-3"} {
		require.Equal(t, want, formatValue(in), "%v", in)
	}
}

// TestDocument compares bench.md for the sample with testdata/bench.golden.md.
func TestDocument(t *testing.T) {
	out := sampleOutput(t)
	var b bytes.Buffer
	m := Machine{CPUs: 2, CPUModel: "Intel(R) Xeon(R) Processor", GoVersion: "go1.26.0", OSArch: "linux/amd64", Commit: "abc1234", Load: "3.52"}
	require.NoError(t, Document(&b, Evaluate(testBenchmarks, out, "m"), m, "make bench", time.Date(2026, 12, 2, 17, 30, 0, 0, time.UTC)))
	golden(t, "testdata/bench.golden.md", b.Bytes())
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/benchtable -update")
	require.Equal(t, string(want), string(got))
}

// TestBenchmarksDeclared checks the declared list: every benchmark named, placed, timed
// and with at least one figure; no figure twice.
func TestBenchmarksDeclared(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range Benchmarks {
		require.True(t, strings.HasPrefix(b.Package, "./"), "%s: package %q", b.Name, b.Package)
		require.True(t, strings.HasPrefix(b.Name, "Benchmark"), b.Name)
		require.NotEmpty(t, b.BenchTime, b.Name)
		require.NotEmpty(t, b.Figures, b.Name)
		for _, f := range b.Figures {
			key := b.Package + " " + b.Name + " " + f.Metric
			require.False(t, seen[key], "figure declared twice: %s", key)
			seen[key] = true
			require.NotEmpty(t, f.What, key)
			require.False(t, math.IsNaN(f.Goal.Bound), key)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	tests := []struct {
		name, doc, want, err string
	}{
		{"replaced", "# B\n" + BeginMarker + "\nold\ntable\n" + EndMarker + "\ntail\n",
			"# B\n" + BeginMarker + "\nnew\n" + EndMarker + "\ntail\n", ""},
		{"empty section", "a " + BeginMarker + EndMarker, "a " + BeginMarker + "\nnew\n" + EndMarker, ""},
		{"no markers", "# B\n", "", "lacks"},
		{"reversed", EndMarker + "\n" + BeginMarker, "", "needs one"},
		{"twice", BeginMarker + EndMarker + BeginMarker + EndMarker, "", "needs one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReplaceSection([]byte(tc.doc), []byte("\nnew\n\n"))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}
