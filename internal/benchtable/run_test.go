package benchtable

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunner runs the fixture module's benchmarks with the real go command: a figure that
// passes, one that misses, a failed, a skipped, a missing, a missing package and a
// hung benchmark (killed at the timeout) each end in their own row.
func TestRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a fixture module")
	}
	t.Setenv("FIXTURE_HANG", "1")
	dir, err := filepath.Abs("testdata/fixture")
	require.NoError(t, err)
	module, err := ModulePath(dir)
	require.NoError(t, err)
	require.Equal(t, "fixture", module)
	one := func(name, metric string, goal Goal) Benchmark {
		return Benchmark{Package: "./", Name: name, BenchTime: "1x", Figures: []Figure{{What: name, Metric: metric, Goal: goal}}}
	}
	good := one("BenchmarkGood", "ratio", AtLeast(0.95))
	good.Figures = append(good.Figures, Figure{What: "lag", Metric: "lag_ms", Goal: AtMost(100)})
	benchmarks := []Benchmark{
		good,
		one("BenchmarkFails", "ratio", AtLeast(1)),
		one("BenchmarkSkips", "ratio", AtLeast(1)),
		one("BenchmarkAbsent", "ratio", AtLeast(1)),
		{Package: "./nowhere", Name: "BenchmarkX", BenchTime: "1x", Figures: []Figure{{What: "x", Metric: "x", Goal: AtLeast(1)}}},
	}
	var log, progress bytes.Buffer
	// The bound must cover a build on a loaded machine; only the hung benchmark reaches it.
	r := &Runner{Dir: dir, Module: module, Timeout: 60 * time.Second, Log: &log, Progress: &progress}
	out, err := r.Run(context.Background(), benchmarks)
	require.NoError(t, err)
	// The hung one, with a short bound: a build slower than that ends the same way.
	hangs := one("BenchmarkHangs", "ratio", AtLeast(1))
	r.Timeout = 3 * time.Second
	hung, err := r.Run(context.Background(), []Benchmark{hangs})
	require.NoError(t, err)
	out.Failures = append(out.Failures, hung.Failures...)
	benchmarks = append(benchmarks, hangs)
	rows := Evaluate(benchmarks, out, module)
	want := []struct {
		pass     bool
		measured bool
		reason   string
	}{
		{true, true, ""},
		{false, true, ""}, // lag_ms 250 > 100
		{false, false, "failed: bench_test.go:19: target refused: 3 of 10"},
		{false, false, "skipped: bench_test.go:21: needs vegeta"},
		{false, false, "not run: benchmark not found"},
		{false, false, "not run: package ./nowhere not found"},
		{false, false, "failed: timed out after 3s"},
	}
	require.Len(t, rows, len(want))
	for i, w := range want {
		require.Equal(t, w.reason, rows[i].Reason, "row %d (%s)", i, rows[i].Figure.What)
		require.Equal(t, w.measured, rows[i].Measured, "row %d", i)
		require.Equal(t, w.pass, rows[i].Pass, "row %d", i)
	}
	require.Equal(t, 0.97, rows[0].Value)

	// Count runs each benchmark that many times, each in its own process, in rounds; every
	// result carries the load around its own run, which the log records too.
	r.Count, r.Timeout = 2, 60*time.Second
	log.Reset()
	twice, err := r.Run(context.Background(), []Benchmark{good, one("BenchmarkSkips", "ratio", AtLeast(1))})
	require.NoError(t, err)
	require.Len(t, twice.Results, 2)
	for _, res := range twice.Results {
		require.NotNil(t, res.Load)
		require.Equal(t, runtime.NumCPU(), res.Load.CPUs)
		require.Greater(t, res.Load.Wall, 0.0)
		require.Greater(t, res.Load.OwnCPU, 0.0, "go test's CPU time, from its rusage")
	}
	require.Equal(t, 4, strings.Count(log.String(), "$ go test "))
	require.Regexp(t, `(?s)BenchmarkGood.*BenchmarkSkips.*BenchmarkGood.*BenchmarkSkips`, log.String(), "rounds")
	fromLog, err := Parse(strings.NewReader(log.String()))
	require.NoError(t, err)
	noLines := func(rs []Result) []Result {
		rs = slices.Clone(rs)
		for i := range rs {
			rs[i].Line = 0 // a line of one run's output, or of the whole log
		}
		return rs
	}
	require.Equal(t, noLines(twice.Results), noLines(fromLog.Results), "the log gives the same results and loads")
	rows = Evaluate([]Benchmark{good}, twice, module)
	require.Equal(t, 2, rows[0].Runs)
	require.Len(t, rows[0].Loads, 2)
	r.Count = 0

	// A budget spent before a benchmark starts leaves it out, with the reason.
	r.Budget = time.Nanosecond
	late := []Benchmark{one("BenchmarkGood", "ratio", AtLeast(0.95))}
	spent, err := r.Run(context.Background(), late)
	require.NoError(t, err)
	rows = Evaluate(late, spent, module)
	require.Equal(t, "not run: the run's time budget (1ns) was spent", rows[0].Reason)
	require.Contains(t, log.String(), "$ go test -run ^$ -bench ^BenchmarkGood$ -benchtime 1x -count 1 -v ./")
	require.Contains(t, progress.String(), "BenchmarkHangs")
}
