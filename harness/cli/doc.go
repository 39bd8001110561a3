// Package cli is the `harness` command: run, validate, plan and list scenarios, list fault
// types, and (hidden) `pdserver` so the harness binary can start the reference server
// itself. Exit codes live here and nowhere else: 0 pass, 1 an assertion failed, 2 a bad
// scenario or usage, 3 the target or the harness's infrastructure failed, or the run was
// invalid.
//
// The main loop of `harness run`:
//
//	sc := scenarios.Load(arg, chaos fault types, flag overrides) // problems → exit 2
//	status := newStatus(stdout)                                    // live line via OnEvent
//	err := harness.Run(ctx, sc, Options{OutDir, OnEvent: status.observe, ...})
//	res := reports.ComputeFile(OutDir/events.jsonl, config from sc)
//	reports.WriteAll(OutDir, res); reports.WriteTable(stdout, res)
//	exit verdict: pass 0, fail 1, invalid (or err) 3
package cli
