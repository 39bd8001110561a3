// Package judge holds what the runner (harness) and the simulator (sim) both need to
// judge a run, below both of them so that nothing imports the runner: reading the
// target's Prometheus text (ParseMetrics) and which gauges count (IsLeakGauge,
// IsSampleGauge); the leak check's verdict (JudgeLeaks, LeakRound); the self-check
// (SelfCheck, LagRecorder); the server_debug report of a silent drop (DebugReportFor,
// ParseDebugRequests); what a request the run's interrupt cancelled was
// (ReclassifyAtInterrupt); how reports judges a scenario (ReportConfig); and the timings and
// the ErrInfrastructure sentinel both runs share.
//
// The runner scrapes and polls; the simulator reads its virtual gauges; both hand the
// answers to the same functions:
//
//	round := judge.NewLeakRound(processes)
//	for { v := round.Update(scrape(), errs, waited); if v.Passed || timeUp { break } }
package judge
