// Package metricnames is the one place the Prometheus names that cross package lines
// are spelled: the SGLang gauges the reference server exports (server/engine) and the
// simulator reports (sim), which the harness samples and leak-checks (harness/judge)
// and faults read as evidence (chaos); vLLM's equivalents; and the router's health
// gauges. A name used by one package only stays in that package.
//
//	g := map[string]float64{metricnames.Running: 3, metricnames.DecodePrealloc: 1}
//	for _, name := range metricnames.LeakGauges { ... }
package metricnames
