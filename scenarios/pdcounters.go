package scenarios

import (
	"fmt"
	"sort"

	"pdsoak/assertion"
	"pdsoak/metricnames"
	"pdsoak/metricsel"
)

// ReferencePrefillCounter is the counter of the reference server's prefill workers that
// rises once per prompt whose KV reached decode (server/engine).
const ReferencePrefillCounter = metricnames.PrefillsCompleted

// PDCounter is one prefill process whose counter proves that disaggregation happened.
type PDCounter struct {
	Process  string // a metrics source's process name (prefill-0, a launch name, a metrics_urls key)
	Selector metricsel.Selector
}

// PDCounters resolves the prefill counters of the run: target.pd_counters as written,
// or for the embedded PD reference server every prefill worker's
// ReferencePrefillCounter. Sorted by process. Invalid selectors are left out (Validate
// reports them).
func (sc *Scenario) PDCounters() []PDCounter {
	var out []PDCounter
	for name, s := range sc.Target.PDCounters {
		if sel, err := metricsel.Parse(s); err == nil {
			out = append(out, PDCounter{Process: name, Selector: sel})
		}
	}
	if len(sc.Target.PDCounters) == 0 && sc.Embedded() && len(sc.Target.Launch) == 0 {
		sel, _ := metricsel.Parse(ReferencePrefillCounter)
		for i := 0; i < sc.Reference.Prefill; i++ {
			out = append(out, PDCounter{Process: fmt.Sprintf("prefill-%d", i), Selector: sel})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Process < out[j].Process })
	return out
}

// metricsProcesses are the process names that have a metrics endpoint the harness
// scrapes (the names target.pd_counters may use).
func (sc *Scenario) metricsProcesses() map[string]bool {
	out := map[string]bool{}
	for name := range sc.Target.MetricsURLs {
		out[name] = true
	}
	for _, l := range sc.Target.Launch {
		if l.MetricsURL != "" {
			out[l.Name] = true
		}
	}
	if sc.Embedded() && len(sc.Target.Launch) == 0 {
		for _, p := range sc.Topology().Processes {
			out[p.Name] = true
		}
	}
	return out
}

// checkPDCounters checks target.pd_counters and that pd_path can be evaluated.
func (v *validator) checkPDCounters() {
	sc := v.sc
	procs := sc.metricsProcesses()
	names := make([]string, 0, len(sc.Target.PDCounters))
	for name := range sc.Target.PDCounters {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := "target.pd_counters." + name
		if _, err := metricsel.Parse(sc.Target.PDCounters[name]); err != nil {
			v.add(p, "%v", err)
		}
		if !procs[name] {
			known := make([]string, 0, len(procs))
			for k := range procs {
				known = append(known, k)
			}
			sort.Strings(known)
			v.add(p, "%q has no metrics endpoint to scrape (processes with one: %v); give it a metrics_url, or name one of those", name, known)
		}
	}
	for i, a := range sc.Assertions {
		pa, err := assertion.ParseAssertion(a)
		if err == nil && pa.PDPath() && len(sc.PDCounters()) == 0 {
			v.add(fmt.Sprintf("assertions[%d]", i), "%s cannot be evaluated: no prefill counter is known; name one per prefill process in target.pd_counters (the embedded reference server has them when reference.prefill > 0)", pa.Name)
		}
	}
}
