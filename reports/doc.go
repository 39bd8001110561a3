// Package reports turns a ledger (pdsoak/ledger's events.jsonl) into Results: a verdict,
// outcome counts, silent drops with what the server said about them, assertion results
// and latency percentiles, the Timeline behind the charts, and across runs the
// Comparison and the history. These are the figures; reports/render draws them
// (results.json, junit.xml, summary.md, the terminal table, report.html, compare and
// trend pages) and imports this package, never the other way. The verdict is decided
// here and nowhere else.
//
// Everything in a report is recomputed from events.jsonl:
//
//	b := reports.NewBuilder(reports.Config{Assertions: sc.Assertions, ...})
//	ledger.Read(f, func(e ledger.Event) error { b.Add(e); return nil }) // streams; a torn last line is skipped
//	res := b.Results()         // verdict pass|fail|invalid, outcomes, drops, assertions, percentiles
//	tl := b.Timeline(res)      // the figures behind the charts (Compute and ComputeFile attach it: res.Timeline())
//	render.WriteAll(dir, res)  // results.json, junit.xml, summary.md, report.html (reports/render)
//	render.WriteTable(os.Stdout, res)
//
// ComputeFile does the first three lines for a file, decoding on every core
// (ledger.ReadParallel: the same events, stats and errors as ledger.Read). Assertions
// are built-in names (no_silent_drops, valid_responses, no_leaks, recovery) or threshold expressions parsed by
// ParseAssertion: p50|p90|p95|p99|max|mean(ttft|itl|e2e) OP duration, rate(outcome) OP
// fraction, count(outcome) OP n, with OP one of < <= > >= == !=.
//
// Every assertion ends pass, fail or not_evaluated (with the reason in its detail): a
// leak check the harness could not run, no leak check at all, recovery with no fault or
// no requests after one, a latency threshold with no samples. A not_evaluated assertion
// is never a pass: it makes the run invalid, and junit.xml reports it as an error.
//
// The ledger also carries the run's context: note events (listed in results.json's notes
// and summary.md's Notes), run_start's provenance and the target event (results.json's
// provenance, one line of summary.md), and run_end's error and interruption cause (each
// an invalid reason). Nothing else adds to the verdict, so recomputing a ledger
// reproduces a run's outputs byte for byte.
//
// valid_responses fails when any request ended invalid (success status, unparseable body)
// or truncated (no terminal marker); explicit errors — rejected, http_error, stream_error,
// transport_error — are valid answers. A run is invalid (not failed) when the ledger shows
// that its evidence cannot be trusted: the harness's self-check failed, a fault did not
// verify, the run ended with an error or was interrupted, a listed assertion could not be
// evaluated, a scheduled request has no terminal outcome, or no request finished at all.
//
// report.html is rendered (by reports/render) from figures, never from the ledger:
// Timeline holds the binned series (completions per second by outcome, TTFT/ITL/e2e
// percentiles, requests in flight), the scraped gauges and GPU readings (downsampled with
// LTTB), every fault window (a Span) with its recovery point and every silent drop. A
// forensics bundle's note event (Source "forensics", Detail its directory) is listed in
// Results.Forensics. The names of a run's output files (ResultsFile, HTMLFile, ...) are
// here, in files.go, for the runner, the renderers and the readers alike.
//
// GPU samples (sample events with Source "gpu", written by the harness through
// harness/gpu when NVML is present) add a gpu section to results.json and one line to
// summary.md: utilisation max and mean, and the mean utilisation over "stuck" samples,
// taken while requests were in flight and none had completed since the previous
// sample — the figure for "requests hang while the GPUs sit idle".
//
// Across runs: ComputeRun keeps the per-request Samples behind a Results, and Compare
// judges two runs of one scenario (ScenarioDigest says whether they are) with noise-aware
// gates — a seeded bootstrap interval of each latency percentile's relative change
// (BootstrapRelDiff; for ITL BootstrapRelDiffsGrouped, which resamples whole requests)
// that must lie above a tolerance, a two-proportion z-test
// (TwoProportionZ) with a minimum change for outcome rates, and any new silent drop —
// drawn as compare.md and compare.html by reports/render (WriteCompareMarkdown, WriteCompareHTML). TTFT
// and e2e are resampled by agent session (GroupBySession), each metric has its own floor
// (Floor, DefaultFloors, chosen by harness/gatecal), several BASE runs pool (CompareRuns,
// PoolRuns), a run whose machine was contended (ContentionResult, from the
// harness/contention samples) makes the answer inconclusive, and IdentityOf says what a
// run ran against so that different ones are refused. A
// history file holds one HistoryEntry per run (AppendHistory, ReadHistory, which skips
// and reports malformed lines by number); render.WriteTrend draws it as a static page.
package reports
