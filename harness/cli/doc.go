// Package cli is the `harness` command: run, validate, plan and list scenarios, list fault
// types, recompute a run's report, shell completion, --version, and (hidden) `pdserver`
// so the harness binary can start the reference server itself. Exit codes live here and
// nowhere else: 0 pass, 1 an assertion failed, 2 a bad scenario or usage, 3 an invalid
// run (the target or the harness's infrastructure failed, the run was interrupted, or a
// listed assertion could not be evaluated).
//
// The main loop of `harness run`:
//
//	sc, notes := load(arg, flag overrides)      // each flag sets only its field; problems → exit 2
//	status := newStatus(stdout)                 // live line and note events via OnEvent
//	err := harness.Run(ctx, sc, Options{OutDir, OnEvent: status.observe, Notes: notes, ...})
//	res := reports.ComputeFile(OutDir/events.jsonl, config from sc) // the verdict, from the ledger alone
//	render.WriteAll(OutDir, res); render.WriteTable(stdout, res)
//	exit verdict: pass 0, fail 1, invalid 3
//
// The verdict and its reasons come only from reports: the runner writes its error and
// the cause of an interruption into run_end, and the CLI's notes into note events, so
// `harness report DIR` rewrites exactly the files `harness run` wrote.
package cli
