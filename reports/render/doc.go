// Package render draws the figures of package reports: results.json, junit.xml,
// summary.md and the terminal table (write.go), report.html (html.go and
// report.html.tmpl), compare.md and compare.html (comparemd.go, comparechart.go), the
// trend page (trend.go), and the charts they all share (chart.go: Chart, laid out by
// Charts and CompareCharts, drawn by RenderSVG with gonum/plot into inline SVG). It reads
// Results, Timeline, Comparison and HistoryEntry values and never the ledger, and it
// decides nothing: a verdict, a regression or a figure comes from reports, which never
// imports this package.
//
//	res, _ := reports.ComputeFile(filepath.Join(dir, ledger.EventsFile), cfg)
//	render.WriteAll(dir, res)          // results.json, junit.xml, summary.md, report.html
//	render.WriteTable(os.Stdout, res)  // the end-of-run table
//	fmt.Println(render.VerdictLine(res))
//
// Every page is self-contained: inline CSS and SVG, no script, nothing fetched from the
// network (TestReportHTML and, where chromium is installed, TestBrowserDOM check it).
package render
