package benchtable

import (
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		env      map[string]string
		results  []Result
		failures []Failure
	}{
		{
			name: "one package, custom metrics",
			in: "goos: linux\ngoarch: amd64\npkg: pdsoak/server/kvtransfer\ncpu: Intel(R) Xeon(R) Processor\n" +
				"BenchmarkTransfer-2   \t     284\t   7902351 ns/op\t1061.53 MB/s\t         0.8259 kv/raw\t         1.978 kv_GB/s\n" +
				"PASS\nok  \tpdsoak/server/kvtransfer\t3.1s\n",
			env: map[string]string{"goos": "linux", "goarch": "amd64", "cpu": "Intel(R) Xeon(R) Processor"},
			results: []Result{{Package: "pdsoak/server/kvtransfer", Name: "BenchmarkTransfer", Procs: 2, Iterations: 284,
				Metrics: map[string]float64{"ns/op": 7902351, "MB/s": 1061.53, "kv/raw": 0.8259, "kv_GB/s": 1.978}, Line: 5}},
		},
		{
			name: "no procs suffix, sub-benchmark, -count 2",
			in: "pkg: m/a\nBenchmarkX\t10\t5 ns/op\nBenchmarkY/n=5-x-4\t1\t2 q\nBenchmarkY/n=5-x-4\t1\t3 q\n" +
				"ok  \tm/a\t1s\n",
			env: map[string]string{},
			results: []Result{
				{Package: "m/a", Name: "BenchmarkX", Procs: 1, Iterations: 10, Metrics: map[string]float64{"ns/op": 5}, Line: 2},
				{Package: "m/a", Name: "BenchmarkY/n=5-x", Procs: 4, Iterations: 1, Metrics: map[string]float64{"q": 2}, Line: 3},
				{Package: "m/a", Name: "BenchmarkY/n=5-x", Procs: 4, Iterations: 1, Metrics: map[string]float64{"q": 3}, Line: 4},
			},
		},
		{
			name: "failure and its log, without -v; package attributed by its FAIL line",
			in: "BenchmarkOpenLoopMaxRate-2\t1\t9 ns/op\n--- BENCH: BenchmarkOpenLoopMaxRate-2\n    bench_test.go:3: note\n" +
				"--- FAIL: BenchmarkBurst1000\n    bench_test.go:90: only 998 of 1000 ok\n    more\nFAIL\nexit status 1\nFAIL\tm/harness\t12.0s\nFAIL\n",
			env: map[string]string{},
			results: []Result{{Package: "m/harness", Name: "BenchmarkOpenLoopMaxRate", Procs: 2, Iterations: 1,
				Metrics: map[string]float64{"ns/op": 9}, Line: 1}},
			failures: []Failure{{Package: "m/harness", Name: "BenchmarkBurst1000", Reason: "bench_test.go:90: only 998 of 1000 ok", Line: 4}},
		},
		{
			name: "panic in the test binary",
			in: "pkg: m/sim\npanic: runtime error: index out of range [3] with length 3\n\ngoroutine 7 [running]:\n" +
				"exit status 2\nFAIL\tm/sim\t0.1s\n",
			env:      map[string]string{},
			failures: []Failure{{Package: "m/sim", Reason: "panic: runtime error: index out of range [3] with length 3", Line: 6}},
		},
		{
			name:     "binary killed without a word",
			in:       "pkg: m/sim\nsignal: killed\nFAIL\tm/sim\t300.0s\n",
			env:      map[string]string{},
			failures: []Failure{{Package: "m/sim", Reason: "test binary failed: m/sim\t300.0s", Line: 3}},
		},
		{
			name: "malformed benchmark lines are ignored",
			in: "pkg: m/a\nBenchmarkA-2 x 1 ns/op\nBenchmarkB-2 1 1 ns/op 2\nBenchmarkC-2 1 one ns/op\nBenchmarkD-2 -1 1 ns/op\n" +
				"Benchmarking the world\nok  \tm/a\t1s\n",
			env: map[string]string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Parse(strings.NewReader(tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.env, out.Env, "env")
			require.Equal(t, tc.results, out.Results, "results")
			require.Equal(t, tc.failures, out.Failures, "failures")
		})
	}
}

// TestParseRecorded reads output recorded from real go test runs.
func TestParseRecorded(t *testing.T) {
	tests := []struct {
		file     string
		results  []string // names
		failures []Failure
	}{
		{"testdata/verbose.txt", []string{"BenchmarkOK"}, []Failure{
			{Package: "bt/p", Name: "BenchmarkFail", Reason: "p_test.go:5: boom: 3", Line: 9},
			{Package: "bt/p", Name: "BenchmarkSkip", Skipped: true, Reason: "p_test.go:6: no vegeta", Line: 12},
		}},
		{"testdata/build-failed.txt", nil, []Failure{
			{Package: "./q", Reason: "setup failed: stat /tmp/bt/q: directory not found", Line: 3},
			{Package: "bt/p", Reason: "build failed", Line: 6},
			{Package: "bt/r", Reason: `build failed: r/r.go:2:23: cannot use "a" (untyped string constant) as int value in return statement`, Line: 7},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(tc.file)
			require.NoError(t, err)
			defer f.Close()
			out, err := Parse(f)
			require.NoError(t, err)
			var names []string
			for _, r := range out.Results {
				names = append(names, r.Name)
			}
			require.Equal(t, tc.results, names)
			require.Equal(t, tc.failures, out.Failures)
		})
	}
}

func TestSplitProcs(t *testing.T) {
	tests := []struct {
		in    string
		name  string
		procs int
	}{
		{"BenchmarkX-16", "BenchmarkX", 16},
		{"BenchmarkX", "BenchmarkX", 1},
		{"BenchmarkX/a-b-2", "BenchmarkX/a-b", 2},
		{"BenchmarkX-0", "BenchmarkX-0", 1},
		{"BenchmarkX-", "BenchmarkX-", 1},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			name, procs := splitProcs(tc.in)
			require.Equal(t, tc.name, name)
			require.Equal(t, tc.procs, procs)
		})
	}
}

// FuzzParse: Parse never panics, every result it returns is well formed, and writing the
// results back in the benchmark line format parses to the same results.
func FuzzParse(f *testing.F) {
	for _, file := range []string{"testdata/verbose.txt", "testdata/build-failed.txt"} {
		b, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(string(b))
	}
	f.Add("pkg: m\nBenchmarkX-2\t3\t1.5 ns/op\t2 kv/raw\nok\tm\t1s\n")
	f.Add("BenchmarkY\t1\tNaN u\t+Inf v\n--- FAIL: BenchmarkY\n    why\nFAIL\tm\t1s\n")
	f.Add("benchtable: before cpus=2 loadavg=0.5\npkg: m\nBenchmarkX-2\t1\t2 q\nok\tm\t1s\n" +
		"benchtable: after loadavg=? wall_s=3 cpu_s=x others_cpus=-1 junk\n")
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Parse(strings.NewReader(in))
		if err != nil {
			return // a line longer than the scanner takes
		}
		var again strings.Builder
		for _, r := range out.Results {
			require.True(t, strings.HasPrefix(r.Name, "Benchmark"), "name %q", r.Name)
			require.GreaterOrEqual(t, r.Procs, 1)
			require.GreaterOrEqual(t, r.Iterations, int64(0))
			if l := r.Load; l != nil { // the runner's load lines: never a negative figure
				require.GreaterOrEqual(t, l.CPUs, 0)
				for _, v := range []float64{l.Before, l.After, l.Wall, l.OwnCPU, l.OthersCPUs} {
					require.False(t, v < 0, "load %+v", *l)
				}
				_ = l.UnderLoad() // decides on anything parsed, without panicking
			}
			again.WriteString(line(r))
		}
		back, err := Parse(strings.NewReader(again.String()))
		require.NoError(t, err)
		require.Len(t, back.Results, len(out.Results))
		for i, r := range back.Results {
			require.Equal(t, line(out.Results[i]), line(r))
		}
	})
}

// line writes r in the benchmark line format, metrics in a fixed order.
func line(r Result) string {
	var b strings.Builder
	b.WriteString(r.Name + "-" + strconv.Itoa(r.Procs) + "\t" + strconv.FormatInt(r.Iterations, 10))
	for _, u := range sortedUnits(r.Metrics) {
		v := r.Metrics[u]
		if math.IsNaN(v) {
			b.WriteString("\tNaN " + u)
			continue
		}
		b.WriteString("\t" + strconv.FormatFloat(v, 'g', -1, 64) + " " + u)
	}
	return b.String() + "\n"
}

func sortedUnits(m map[string]float64) []string { return slices.Sorted(maps.Keys(m)) }
