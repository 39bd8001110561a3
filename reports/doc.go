// Package reports defines the ledger line (Event, written to events.jsonl by the harness)
// and turns a ledger into Results: a verdict, outcome counts, silent drops with what the
// server said about them, assertion results and latency percentiles, written as
// results.json, junit.xml, summary.md and a terminal table.
//
// Everything in a report is recomputed from events.jsonl:
//
//	evs, err := reports.ReadFile("out/smoke/events.jsonl") // tolerant of a torn last line
//	res := reports.Compute(evs, reports.Config{Assertions: sc.Assertions, ...})
//	reports.WriteAll(dir, res) // results.json, junit.xml, summary.md
//	reports.WriteTable(os.Stdout, res)
package reports
