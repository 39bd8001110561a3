package reports

// The fixtures of this package's tests, for the tests that also render (package
// reports_test: they import reports/render, which imports reports).
var (
	Synthetic       = synthetic
	SessionRun      = sessionRun
	Contended       = contended
	GoldenRun       = goldenRun
	SeriesNames     = names
	Golden          = golden
	GoldenResults   = goldenResults
	GoldenConfig    = goldenConfig
	ExplainedLedger = explainedLedger
	ReqDone         = reqDone
	GPUSample       = gpuSample
	Sched           = sched
	SoakLedger      = soakLedger
	PointPairs      = pointPairs
)
