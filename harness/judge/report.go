package judge

import (
	"pdsoak/reports"
	"pdsoak/scenarios"
)

// ReportConfig is how reports judges a run of sc: its assertions, recovery bounds and the
// names the report shows. The CLI uses it for run, report and compare, and the runner for
// the verdict that decides whether a run ends with a forensics bundle.
func ReportConfig(sc *scenarios.Scenario) reports.Config {
	target := sc.Target.URL
	if target == "" {
		target = scenarios.Plan(sc).Target
	}
	return reports.Config{
		Scenario:   sc.Name,
		Seed:       sc.Seed,
		Target:     target,
		Assertions: sc.Assertions,
		// A trace replay's arrival curve: the trace's schedule against what was sent.
		ArrivalWorkloads: sc.TraceWorkloads(),
		Recovery: reports.RecoveryConfig{
			Window:    sc.Recovery.Window.D(),
			Within:    sc.Recovery.Within.D(),
			Threshold: sc.Recovery.Threshold,
		},
	}
}
