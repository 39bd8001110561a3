package reports

// The names of the files a run's directory holds. They are the contract between the
// runner that writes a run, reports/render that draws it and whatever reads it back
// (harness report, compare, trend, nightly), so they live with the figures rather than
// with any one renderer.

// Output file names.
const (
	ResultsFile = "results.json"
	JUnitFile   = "junit.xml"
	SummaryFile = "summary.md"
)

// HTMLFile is the run's picture (JUnit failure texts point at it); ScenarioFile the resolved scenario that
// `harness run` leaves next to the ledger (shown in the report when present).
const (
	HTMLFile     = "report.html"
	ScenarioFile = "scenario.json"
)

// TrendFile is the trend page's name in its directory.
const TrendFile = "index.html"

// Compare outputs.
const (
	CompareMarkdownFile = "compare.md"
	CompareHTMLFile     = "compare.html"
)
