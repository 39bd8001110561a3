// Package nightly is one night of the nightly soak as code: `harness nightly` runs it,
// the GitHub workflow only prepares the machine and calls that command, and `make test`
// runs it end to end on the reference server as two nights.
//
// A night is: preflight (every scenario loads, names are distinct, the archive is
// writable) → run each scenario into its own directory of the night, appending one
// history line each → compare each run once against its baseline, the last N good
// nights of the same scenario (same digest) still in the archive pooled into one
// (reports.CompareRuns; a night made against something else is refused) → prune the archive to the
// retention count → render the trend page at the archive's root, each row linking
// that night's own report → write the night's manifest (night.json) and summary
// (summary.md, also appended to $GITHUB_STEP_SUMMARY) → the exit code.
//
// The archive (what Pages publishes, whole):
//
//	ARCHIVE/history.jsonl                      one line per run, dir: nights/<night>/<scenario>
//	ARCHIVE/index.html                         the trend page
//	ARCHIVE/nights/<date>-<sha>/night.json     the night's manifest: runs, codes, baselines
//	ARCHIVE/nights/<date>-<sha>/summary.md
//	ARCHIVE/nights/<date>-<sha>/<scenario>/    the run's outputs (report.html, events.jsonl, ...)
//	ARCHIVE/nights/<date>-<sha>/<scenario>/compare/   the pooled comparison
//
// The decisions are pure and tested apart (Baselines, StateOf, Prune, ExitCode,
// NightName); Run is the driver. Running a scenario is the caller's RunFunc (the CLI's
// own run path, in process), so this package never imports the harness's runner:
//
//	res, err := nightly.Run(ctx, cfg, run, harness.ReportConfig, nightly.WithClock(now))
//	// preflight(cfg.Specs) -> for each spec: run(spec) -> compare(baselines) ->
//	// Prune(keep) -> trend(index.html) -> night.json, summary.md -> ExitCode(res)
package nightly
