package benchtable

import (
	"bytes"
	"flag"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sample is go test output for the two benchmarks of testBenchmarks and more.
const sample = `goos: linux
goarch: amd64
pkg: m/server/kvtransfer
cpu: Intel(R) Xeon(R) Processor
BenchmarkTransfer-2   	     284	   7902351 ns/op	         0.8259 kv/raw
BenchmarkTransfer-2   	     280	   7902351 ns/op	         0.7000 kv/raw
BenchmarkTransfer-2   	     281	   7902351 ns/op	         0.8400 kv/raw
PASS
ok  	m/server/kvtransfer	9.0s
pkg: m/harness
BenchmarkOpenLoopMaxRate-2	1	100 ns/op	0.81 ratio	4000 harness_req/s
BenchmarkMemoryPerInFlight-2	1	100 ns/op	11000 heap-bytes/req
--- FAIL: BenchmarkBurst1000
    bench_test.go:90: only 998 of 1000 ok
--- SKIP: BenchmarkHeldStreams
    bench_test.go:12: ulimit -n is 1024
FAIL
FAIL	m/harness	20.0s
# m/server/launcher [m/server/launcher.test]
server/launcher/bench_test.go:3:2: undefined: nope
FAIL	m/server/launcher [build failed]
`

var testBenchmarks = []Benchmark{
	{Package: "./server/kvtransfer", Name: "BenchmarkTransfer", BenchTime: "2s", Figures: []Figure{
		{What: "KV ÷ raw", Metric: "kv/raw", Goal: AtLeast(0.8)},
	}},
	{Package: "./harness", Name: "BenchmarkOpenLoopMaxRate", BenchTime: "1x", Figures: []Figure{
		{What: "harness ÷ vegeta", Metric: "ratio", Goal: AtLeast(0.95)},
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
}

func TestEvaluate(t *testing.T) {
	out, err := Parse(strings.NewReader(sample))
	require.NoError(t, err)
	rows := Evaluate(testBenchmarks, out, "m")
	type want struct {
		metric string
		value  float64
		runs   int
		pass   bool
		reason string
	}
	wants := []want{
		{"kv/raw", 0.8259, 3, true, ""}, // the median of 0.70, 0.8259, 0.84
		{"ratio", 0.81, 1, false, ""},
		{"harness_req/s", 4000, 1, true, ""},
		{"bytes/in-flight-request", 0, 0, false, `benchmark did not report "bytes/in-flight-request" (it reported heap-bytes/req, ns/op)`},
		{"ok", 0, 0, false, "failed: bench_test.go:90: only 998 of 1000 ok"},
		{"held_streams", 0, 0, false, "skipped: bench_test.go:12: ulimit -n is 1024"},
		{"added_p50_ms", 0, 0, false, "package failed: build failed: server/launcher/bench_test.go:3:2: undefined: nope"},
		{"sim_speedup", 0, 0, false, "not run: benchmark not found"},
	}
	require.Len(t, rows, len(wants))
	for i, w := range wants {
		t.Run(w.metric, func(t *testing.T) {
			r := rows[i]
			require.Equal(t, w.metric, r.Figure.Metric)
			require.Equal(t, w.reason, r.Reason)
			require.Equal(t, w.reason == "", r.Measured)
			require.Equal(t, w.value, r.Value)
			require.Equal(t, w.runs, r.Runs)
			require.Equal(t, w.pass, r.Pass)
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
	out, err := Parse(strings.NewReader(sample))
	require.NoError(t, err)
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
