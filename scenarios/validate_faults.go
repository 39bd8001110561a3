package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"pdsoak/suggest"
)

// checkFaultTimeline checks fault_timeline; the faults themselves are checked against
// it by checkFaultWindow.
func (v *validator) checkFaultTimeline() {
	sc := v.sc
	ft := sc.FaultTimeline
	switch ft.mode() {
	case CoverFixed:
		if ft.Period != 0 {
			v.add("fault_timeline.period", "only applies with cover: repeat or scale")
		}
		return
	case CoverRepeat, CoverScale:
	default:
		v.oneOf("fault_timeline.cover", ft.Cover, CoverFixed, CoverRepeat, CoverScale)
		return
	}
	spec := sc.specFaults()
	if ft.Period < 0 {
		v.add("fault_timeline.period", "must be > 0")
		return
	}
	if len(spec) == 0 {
		return
	}
	period := ft.period(spec)
	if period <= 0 {
		v.add("fault_timeline", "cover: %s needs a period: every fault starts at 0s and is held, so the list has no length", ft.Cover)
		return
	}
	if ft.mode() == CoverRepeat {
		if n := repeatCount(spec, period, sc.Duration); n > MaxInjections {
			v.add("fault_timeline.period", "repeating every %s over %s makes more than %d injections; lengthen the period", period, sc.Duration, MaxInjections)
		}
	}
}

func (v *validator) checkFault(i int, f Fault, topo Topology, names map[string]bool, o options) {
	p := fmt.Sprintf("faults[%d]", i)
	switch {
	case f.Name == "":
		v.add(p+".name", "must be set")
	case names[f.Name]:
		v.add(p+".name", "duplicate fault name %q", f.Name)
	case v.sc.FaultTimeline.mode() == CoverRepeat && strings.Contains(f.Name, "#"):
		v.add(p+".name", "must not contain '#' with cover: repeat (the later cycles are named %s#2, %s#3, ...)", f.Name, f.Name)
	}
	names[f.Name] = true
	var ft FaultType
	known := true
	if f.Type == "" {
		v.add(p+".type", "must be set")
		known = false
	} else if o.faultTypes != nil {
		ft, known = o.faultTypes[f.Type]
		if !known {
			list := slices.Sorted(maps.Keys(o.faultTypes))
			hint := ""
			if s := suggest.Closest(f.Type, list); s != "" {
				hint = fmt.Sprintf("did you mean %q? ", s)
			}
			v.add(p+".type", "unknown fault type %q (%sknown: %s)", f.Type, hint, strings.Join(list, ", "))
		}
	}
	kind, ok := topo.Resolve(f.Target)
	switch {
	case f.Target == "":
		v.add(p+".target", "must be set (%s)", describeTargets(topo, ft.Targets))
	case !ok:
		v.add(p+".target", "%q does not exist in this topology (%s)", f.Target, describeTargets(topo, ft.Targets))
	case known && ft.Targets != 0 && ft.Targets&kind == 0:
		v.add(p+".target", "fault type %s needs a %s target, and %q is a %s (%s)", f.Type, ft.Targets, f.Target, kind, describeTargets(topo, ft.Targets))
	}
	v.checkFaultWindow(p, f)
	if known && ft.Check != nil {
		if err := ft.Check(f); err != nil {
			v.add(p+".params", "%v", err)
		}
	}
}

// checkFaultWindow checks when a fault (as written) runs. With a fixed timeline it must
// lie within the duration; repeated or scaled, within one period (the expansion fits the
// injections into the duration).
func (v *validator) checkFaultWindow(p string, f Fault) {
	sc := v.sc
	if f.At < 0 {
		v.add(p+".at", "must be ≥ 0")
	}
	if f.For < 0 {
		v.add(p+".for", "must be ≥ 0 (0: until the end of load)")
	}
	if f.At < 0 || f.For < 0 {
		return
	}
	if f.At+f.For < f.At {
		v.add(p+".for", "at + for is too large")
		return
	}
	switch sc.FaultTimeline.mode() {
	case CoverFixed:
		if sc.Duration > 0 && f.At >= sc.Duration {
			v.add(p+".at", "(%s) must be before the end of load (duration %s)", f.At, sc.Duration)
		} else if f.For > 0 && sc.Duration > 0 && f.At+f.For > sc.Duration {
			v.add(p+".for", "at + for (%s) exceeds the scenario's duration (%s)", f.At+f.For, sc.Duration)
		}
	case CoverRepeat:
		if f.For == 0 {
			v.add(p+".for", "must be > 0 with cover: repeat (a fault held until the end of load cannot repeat)")
		} else if sc.FaultTimeline.Period > 0 && f.At+f.For > sc.FaultTimeline.Period {
			v.add(p+".for", "at + for (%s) exceeds fault_timeline.period (%s): the cycles would overlap", f.At+f.For, sc.FaultTimeline.Period)
		}
	case CoverScale:
		if period := sc.FaultTimeline.period(sc.specFaults()); period > 0 && f.At >= period {
			v.add(p+".at", "(%s) must be before the end of fault_timeline.period (%s)", f.At, period)
		} else if sc.FaultTimeline.Period > 0 && f.At+f.For > sc.FaultTimeline.Period {
			v.add(p+".for", "at + for (%s) exceeds fault_timeline.period (%s): scaled, it would end after the load", f.At+f.For, sc.FaultTimeline.Period)
		}
	}
}

func describeTargets(topo Topology, kind TargetKind) string {
	if kind == 0 {
		kind = TargetAny
	}
	names := topo.Names(kind)
	if len(names) == 0 {
		return "this topology has no " + kind.String() + " targets"
	}
	return "valid targets: " + strings.Join(names, ", ")
}
