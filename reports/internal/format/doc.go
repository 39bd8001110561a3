// Package format holds the few wordings that the figures (package reports: verdict
// details, regressions) and their renderings (reports/render: summary.md, junit.xml,
// report.html, compare and trend pages) both write, so that a duration, a percentage or a
// count reads the same in a verdict and on a page:
//
//	format.Seconds(1.23456)        // "1.235s"
//	format.Plural(3, "silent drop") // "3 silent drops"
//	format.Pct(0.975)              // "97.5%"
//
// It is internal to reports: nothing outside reports and reports/render formats with it.
package format
