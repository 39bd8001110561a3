package scenarios

import (
	"fmt"
	"time"
)

// holdingFaults are the fault types that hold requests (nothing comes back while they
// act) rather than failing them: a window longer than the deadline a held request
// must be answered within makes even a correct server drop it.
var holdingFaults = map[string]bool{
	"process_pause": true, "scheduler_stall": true, "kv_transfer_stall": true, "bootstrap_stall": true,
}

// DeadlineWarnings says, after ApplyDefaults, which faults hold requests for longer
// than the deadline those requests must be answered within: the first-token deadline,
// and the stall deadline too when streams already under way stop (anything but a
// prefill worker stops them). It matters most when fault_timeline stretches the
// windows with --duration (cover: scale) and not the deadlines. A warning, not a
// problem: a scenario may mean to show the drops.
func (sc *Scenario) DeadlineWarnings() []string {
	spec := sc.specFaults()
	topo := sc.Topology()
	var out []string
	for i, f := range sc.Faults {
		if !holdingFaults[f.Type] || f.For <= 0 {
			continue
		}
		bound, name := sc.Deadlines.FirstToken, "deadlines.first_token"
		prefillOnly := len(topo.Members(f.Target)) > 0
		for _, m := range topo.Members(f.Target) {
			if topo.roleOf(m) != "prefill" {
				prefillOnly = false
			}
		}
		if !prefillOnly && f.Type != "bootstrap_stall" && sc.Deadlines.Stall > 0 && sc.Deadlines.Stall < bound {
			bound, name = sc.Deadlines.Stall, "deadlines.stall"
		}
		if bound <= 0 || f.For <= bound {
			continue
		}
		how := ""
		if sc.FaultTimeline.mode() == CoverScale && i < len(spec) && spec[i].For != f.For {
			how = fmt.Sprintf(" (fault_timeline scale at duration %v: for %v becomes %v)", sc.Duration, spec[i].For, f.For)
		}
		out = append(out, fmt.Sprintf("fault %s (%s on %s) holds requests for %v%s, longer than %s (%v): a correct server cannot answer them in time; shorten its for or raise the deadline",
			f.Name, f.Type, f.Target, time.Duration(f.For), how, name, time.Duration(bound)))
	}
	return out
}

// roleOf is a process's role ("" when it is not one of the topology's).
func (t Topology) roleOf(name string) string {
	for _, p := range t.Processes {
		if p.Name == name {
			return p.Role
		}
	}
	return ""
}
