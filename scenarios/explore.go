package scenarios

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"time"
)

// Argument lists explore.flags may vary, and the reference field each one edits.
const (
	ExploreArgsAll     = "args"    // reference.args: every worker
	ExploreArgsPrefill = "prefill" // reference.prefill_args
	ExploreArgsDecode  = "decode"  // reference.decode_args
	ExploreArgsRouter  = "router"  // reference.router_args
)

// ExploreArgLists are the keys of explore.flags.
var ExploreArgLists = []string{ExploreArgsAll, ExploreArgsPrefill, ExploreArgsDecode, ExploreArgsRouter}

// Explore defaults and bounds.
const (
	DefaultExploreCatalogueFaults = 3
	MaxExploreFaults              = 100
	DefaultExploreMinFaultFor     = Duration(time.Second)
)

var flagNameRE = regexp.MustCompile(`^--[a-z0-9][a-z0-9-]*$`)

// ArgList returns the argument list of the reference topology that an explore.flags key
// names (nil for an unknown key), for reading and editing.
func (r *Reference) ArgList(key string) *[]string {
	switch key {
	case ExploreArgsAll:
		return &r.Args
	case ExploreArgsPrefill:
		return &r.PrefillArgs
	case ExploreArgsDecode:
		return &r.DecodeArgs
	case ExploreArgsRouter:
		return &r.RouterArgs
	}
	return nil
}

// IsInteger reports whether a flag range draws integers: both bounds are whole numbers.
func IsInteger(r []float64) bool {
	for _, v := range r {
		if v != math.Trunc(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// exploreDefaults fills the explore section (when there is one): the fault mode, how
// many injections a run may draw and the range of their windows.
func (sc *Scenario) exploreDefaults() {
	e := sc.Explore
	if e == nil {
		return
	}
	if e.Faults == "" {
		e.Faults = ExploreFaultsScenario
	}
	if e.MaxFaults == 0 && !sc.IsSet("explore.max_faults") {
		switch e.Faults {
		case ExploreFaultsScenario:
			e.MaxFaults = min(len(sc.specFaults()), MaxExploreFaults)
		case ExploreFaultsCatalogue:
			e.MaxFaults = DefaultExploreCatalogueFaults
		}
	}
	if e.FaultFor == nil && e.Faults != ExploreFaultsNone {
		d := sc.Duration
		if len(e.Duration) == 2 && e.Duration[0] > 0 {
			d = min(d, e.Duration[0])
		}
		e.FaultFor = []Duration{DefaultExploreMinFaultFor, max(DefaultExploreMinFaultFor, d/2)}
	}
}

// checkExplore checks the explore section: every range is [low, high] within what the
// field it varies accepts, and applies to something in the scenario.
func (v *validator) checkExplore() {
	e := v.sc.Explore
	if e == nil {
		return
	}
	if len(e.Duration) > 0 && v.rangeLen("explore.duration", len(e.Duration)) {
		lo, hi := e.Duration[0], e.Duration[1]
		switch {
		case lo <= 0:
			v.add("explore.duration", "the low bound must be > 0, got %s", lo)
		case lo > hi:
			v.add("explore.duration", "the low bound (%s) must not exceed the high bound (%s)", lo, hi)
		default:
			for i, w := range v.sc.Workloads {
				if w.Start >= lo {
					v.add("explore.duration", "the low bound (%s) must be after workloads[%d].start (%s)", lo, i, w.Start)
				}
			}
		}
	}
	v.intRange("explore.agents", e.Agents, 1, 10000)
	if len(e.Agents) > 0 && !v.sc.hasWorkload(WorkloadAgents) {
		v.add("explore.agents", "applies to agents workloads, and the scenario has none")
	}
	v.intRange("explore.turns", e.Turns, 1, 10000)
	if len(e.Turns) > 0 && !v.sc.hasWorkload(WorkloadAgents) {
		v.add("explore.turns", "applies to agents workloads, and the scenario has none")
	}
	if len(e.Rate) > 0 && v.rangeLen("explore.rate", len(e.Rate)) {
		lo, hi := e.Rate[0], e.Rate[1]
		switch {
		case !(lo > 0) || math.IsInf(hi, 0) || math.IsNaN(hi):
			v.add("explore.rate", "the low bound must be > 0 requests per second, got %g", lo)
		case lo > hi:
			v.add("explore.rate", "the low bound (%g) must not exceed the high bound (%g)", lo, hi)
		case hi > 100000:
			v.add("explore.rate", "the high bound must be ≤ 100000 requests per second")
		}
		if !v.sc.hasWorkload(WorkloadOpenLoop) {
			v.add("explore.rate", "applies to open_loop workloads, and the scenario has none")
		}
	}
	v.checkExploreFlags(e)
	v.oneOf("explore.faults", e.Faults, ExploreFaultsScenario, ExploreFaultsCatalogue, ExploreFaultsNone)
	switch {
	case e.MaxFaults < 0 || e.MaxFaults > MaxExploreFaults:
		v.add("explore.max_faults", "must be in [0, %d], got %d", MaxExploreFaults, e.MaxFaults)
	case e.MaxFaults > 0 && e.Faults == ExploreFaultsNone:
		v.add("explore.max_faults", "applies only with faults: scenario or catalogue")
	}
	if len(e.FaultFor) > 0 && v.rangeLen("explore.fault_for", len(e.FaultFor)) {
		lo, hi := e.FaultFor[0], e.FaultFor[1]
		switch {
		case lo <= 0:
			v.add("explore.fault_for", "the low bound must be > 0, got %s", lo)
		case lo > hi:
			v.add("explore.fault_for", "the low bound (%s) must not exceed the high bound (%s)", lo, hi)
		case lo >= v.exploreMinDuration():
			v.add("explore.fault_for", "the low bound (%s) must be shorter than the shortest duration explored (%s)", lo, v.exploreMinDuration())
		}
	}
}

func (v *validator) checkExploreFlags(e *Explore) {
	for _, key := range slices.Sorted(maps.Keys(e.Flags)) {
		p := "explore.flags." + key
		if !slices.Contains(ExploreArgLists, key) {
			v.oneOf(p, key, ExploreArgLists...)
			continue
		}
		pd := v.sc.Reference.Prefill > 0 && v.sc.Reference.Decode > 0
		if (key == ExploreArgsPrefill || key == ExploreArgsDecode || key == ExploreArgsRouter) && !pd {
			v.add(p, "the topology is colocated (no %s process); vary the workers' flags under args", key)
		}
		flags := e.Flags[key]
		if len(flags) == 0 {
			v.add(p, "names no flag; write e.g. {--max-total-tokens: [512, 65536]}")
		}
		for _, name := range slices.Sorted(maps.Keys(flags)) {
			fp := p + "." + name
			if !flagNameRE.MatchString(name) {
				v.add(fp, "must be a long flag name such as --max-total-tokens (no value, no '='), got %q", name)
			}
			r := flags[name]
			if !v.rangeLen(fp, len(r)) {
				continue
			}
			lo, hi := r[0], r[1]
			switch {
			case math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0):
				v.add(fp, "the bounds must be finite numbers")
			case lo > hi:
				v.add(fp, "the low bound (%g) must not exceed the high bound (%g)", lo, hi)
			case math.Abs(lo) > 1e15 || math.Abs(hi) > 1e15:
				v.add(fp, "the bounds must lie within ±1e15")
			}
		}
	}
}

// rangeLen checks that a range has two bounds.
func (v *validator) rangeLen(path string, n int) bool {
	if n != 2 {
		v.add(path, "must be a range [low, high] (two values), got %d", n)
		return false
	}
	return true
}

func (v *validator) intRange(path string, r []int, least, most int) {
	if len(r) == 0 || !v.rangeLen(path, len(r)) {
		return
	}
	switch lo, hi := r[0], r[1]; {
	case lo < least || hi > most:
		v.add(path, "the bounds must lie in [%d, %d], got [%d, %d]", least, most, lo, hi)
	case lo > hi:
		v.add(path, "the low bound (%d) must not exceed the high bound (%d)", lo, hi)
	}
}

// exploreMinDuration is the shortest load duration a run of explore may draw.
func (v *validator) exploreMinDuration() Duration {
	if e := v.sc.Explore; e != nil && len(e.Duration) == 2 && e.Duration[0] > 0 {
		return e.Duration[0]
	}
	return v.sc.Duration
}

func (sc *Scenario) hasWorkload(typ string) bool {
	for _, w := range sc.Workloads {
		if w.Type == typ {
			return true
		}
	}
	return false
}

// String describes the search space in one line, for the CLI.
func (e *Explore) String() string {
	if e == nil {
		return "seed only"
	}
	s := "seed"
	if len(e.Duration) == 2 {
		s += fmt.Sprintf(", duration %s..%s", e.Duration[0], e.Duration[1])
	}
	if len(e.Agents) == 2 {
		s += fmt.Sprintf(", agents %d..%d", e.Agents[0], e.Agents[1])
	}
	if len(e.Turns) == 2 {
		s += fmt.Sprintf(", turns %d..%d", e.Turns[0], e.Turns[1])
	}
	if len(e.Rate) == 2 {
		s += fmt.Sprintf(", rate %g..%g", e.Rate[0], e.Rate[1])
	}
	for _, key := range slices.Sorted(maps.Keys(e.Flags)) {
		for _, name := range slices.Sorted(maps.Keys(e.Flags[key])) {
			if r := e.Flags[key][name]; len(r) == 2 {
				s += fmt.Sprintf(", %s %s %g..%g", key, name, r[0], r[1])
			}
		}
	}
	if e.Faults != "" && e.Faults != ExploreFaultsNone && e.MaxFaults > 0 {
		s += fmt.Sprintf(", up to %d faults (%s)", e.MaxFaults, e.Faults)
	}
	return s
}
