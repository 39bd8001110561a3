// Package gatecal calibrates compare's regression gate: it runs many pairs of one
// scenario against the reference server — same-server pairs with different seeds (any
// regression among them is a false alarm) and pairs whose NEW server is known to be
// slower by a set fraction (--sim-slowdown on every worker: each step takes that much
// longer) — compares each pair as `harness compare` would, and reports, per latency
// metric, the false-alarm rate and the detection rate, for the gate's floors and for a
// sweep of relative floors so that the floors can be chosen from the figures.
//
// By default the pairs run in the simulator (`harness run --sim`: virtual clock,
// deterministic per seed, a few seconds a run), so the figures measure the gate and the
// server's own variability rather than a busy machine; Config.Real runs them on the
// real reference server instead (for a quiet machine: each run takes its full duration).
//
// Main loop (cmd/gatecal, `make gate-calibration`):
//
//	rep, err := gatecal.Run(ctx, gatecal.Config{Pairs: 40, Slowdowns: []float64{0.10, 0.25}})
//	rep.WriteMarkdown(os.Stdout)   // rates per metric, the floor sweep, the goals met
package gatecal
