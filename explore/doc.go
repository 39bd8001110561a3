// Package explore searches a scenario's space for liveness failures under simulation
// (`harness explore`) and shrinks each failure it finds to a minimal scenario file that
// replays it.
//
// A scenario's explore: section (scenarios.Explore) gives the space: every run draws
// the seed, and within the given ranges the load duration, every agents workload's
// agents and turns, every open_loop workload's rate, server flags of the reference
// topology (reference.args, prefill_args, decode_args, router_args) and a fault
// schedule (from the scenario's own faults, the whole catalogue, or none). Run i's
// parameters depend only on (explore seed, i), so a search's runs are the same on one
// core or sixteen.
//
// Every run is a scenario file: the parameters are applied to the scenario (Apply),
// rendered as YAML (Render) and loaded back with the strict loader, and that scenario
// goes to the RunFunc (the simulator, sim.Run in the harness), which writes
// events.jsonl in the run's own directory. The verdict is reports' (the only place one
// is decided); a failing run's Signature is its failed assertions plus the stages where
// the server held its silent drops ("no_silent_drops@decode:prealloc").
//
//	rep, err := explore.Search(ctx, sc, explore.Options{
//		Run: run, Runs: 1000, Parallel: 16, Seed: 1, OutDir: "out/explore",
//		FaultTypes: chaos.FaultTypes(), ReportConfig: judge.ReportConfig,
//	})
//	// for i in 0..Runs-1 on Parallel workers: Draw(seed, i) -> Apply -> Render -> Parse -> Run -> judge
//	// then for each distinct signature, its first run is shrunk:
//	//   drop faults, workloads and flags; lower agents, turns and rates; move flags toward
//	//   the scenario's own values; shorten fault windows and the duration — each step
//	//   rerun and kept only when it fails with the same signature, the seed fixed
//	// and written as shrunk-<signature>.yaml, then loaded and run once more to confirm.
//	explore.WriteTable(os.Stdout, rep) // explore.json is in OutDir already
//
// The package never imports harness or chaos: the run function, the fault catalogue
// and the report configuration come in as Options.
package explore
