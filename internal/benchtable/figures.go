package benchtable

// Benchmarks is the one list of figures `make bench` reports: each benchmark, how long it
// runs, and the figures (metric and goal) read from its output. The package and benchmark
// names are the ones other tools read; keep them.
var Benchmarks = []Benchmark{
	{Package: "./harness", Name: "BenchmarkOpenLoopMaxRate", BenchTime: "1x", Figures: []Figure{
		// The figure of record: both sides at 64 workers on reused connections compare the
		// per-request cost of the two paths. Unbounded, both spawn a worker and dial
		// whenever every worker is busy, so that ratio follows the dials each side happened
		// to make (docs/BENCHMARKS.md).
		{What: "harness open-loop max rate ÷ vegeta's own attack, same target, 64 workers each", Metric: "ratio_64_workers", Goal: AtLeast(0.95)},
		{What: "the same, workers unbounded (dominated by dialing)", Metric: "ratio", Goal: Info()},
	}},
	{Package: "./harness", Name: "BenchmarkMemoryPerInFlight", BenchTime: "1x", Figures: []Figure{
		{What: "memory per in-flight stream, 5,000 held streams", Metric: "bytes/in-flight-request", Goal: AtMost(12288)},
	}},
	{Package: "./server/launcher", Name: "BenchmarkRouterLatency", BenchTime: "1x", Figures: []Figure{
		{What: "router added latency p50, small requests", Metric: "added_p50_ms", Goal: AtMost(0.2)},
		{What: "router added latency p99, small requests", Metric: "added_p99_ms", Goal: AtMost(1)},
	}},
	{Package: "./server/launcher", Name: "BenchmarkRouterThroughput", BenchTime: "1x", Figures: []Figure{
		{What: "PD throughput ÷ colocated, 256 simtime streams", Metric: "pd/colo", Goal: AtLeast(0.95)},
	}},
	{Package: "./server/launcher", Name: "BenchmarkRouterZeroTime", BenchTime: "1x", Figures: []Figure{
		{What: "requests/s through the router, zero-time compute, 256 streams of 8 tokens", Metric: "pd_zero_req/s", Goal: AtLeast(5000)},
	}},
	{Package: "./server/kvtransfer", Name: "BenchmarkTransfer", BenchTime: "2s", Figures: []Figure{
		{What: "KV transfer ÷ raw loopback TCP copy", Metric: "kv/raw", Goal: AtLeast(0.8)},
	}},
	{Package: "./harness", Name: "BenchmarkHeldStreams", BenchTime: "1x", Figures: []Figure{
		// Where RLIMIT_NOFILE stops one process short of 20,000 sockets: the count its
		// measured per-stream CPU and memory allow within 1 CPU and 1 GiB (docs/BENCHMARKS.md).
		{What: "held streams from one harness process (descriptor limit below 20,000: the ceiling their measured CPU and memory imply)", Metric: "held_streams", Goal: AtLeast(20000)},
		{What: "send lag p99 with the streams held", Metric: "lag_p99_ms", Goal: AtMost(5)},
	}},
	{Package: "./harness", Name: "BenchmarkBurst1000", BenchTime: "1x", Figures: []Figure{
		{What: "burst of 1,000 streams, embedded topology (simtime): ok", Metric: "ok", Goal: AtLeast(1000)},
		{What: "burst of 1,000 streams: the run is valid", Metric: "valid", Goal: AtLeast(1)},
		{What: "burst of 1,000 streams: send lag p99", Metric: "send_lag_p99_ms", Goal: AtMost(100)},
	}},
	{Package: "./sim", Name: "BenchmarkSimSpeedup", BenchTime: "1x", Figures: []Figure{
		{What: "simulated time ÷ wall time (issue 12)", Metric: "sim_speedup", Goal: AtLeast(500)},
	}},
}

// Benchmark is one `go test -bench` run and the figures read from it.
type Benchmark struct {
	Package   string // relative to the module root, as `go test` takes it: "./harness"
	Name      string // the top-level benchmark function
	BenchTime string // -benchtime: "1x" for benchmarks that do a fixed amount of work
	Figures   []Figure
}

// Figure is one reported metric and its goal.
type Figure struct {
	What   string // the figure, in words
	Metric string // the unit the benchmark reports it under (b.ReportMetric)
	Goal   Goal
}

// Goal is a bound a metric must meet, or Info: a figure shown for information.
type Goal struct {
	Max   bool // the value must be at most Bound (else at least)
	Bound float64
	Info  bool // no goal: shown, never PASS or MISS, not counted
}

// Info is a figure without a goal.
func Info() Goal { return Goal{Info: true} }

// AtLeast is a lower bound.
func AtLeast(v float64) Goal { return Goal{Bound: v} }

// AtMost is an upper bound.
func AtMost(v float64) Goal { return Goal{Max: true, Bound: v} }

// Met reports whether v meets the goal (NaN never does, nor anything an Info goal).
func (g Goal) Met(v float64) bool {
	switch {
	case g.Info:
		return false
	case g.Max:
		return v <= g.Bound
	}
	return v >= g.Bound
}

func (g Goal) String() string {
	if g.Info {
		return "info"
	}
	if g.Max {
		return "≤ " + formatValue(g.Bound)
	}
	return "≥ " + formatValue(g.Bound)
}
