package scenarios

import (
	"fmt"
	"maps"
	"math"
	"time"
)

// MaxInjections bounds the faults a repeated timeline may expand into: a period of
// milliseconds over hours would otherwise schedule millions.
const MaxInjections = 10_000

// mode returns the timeline's cover mode, fixed when unset.
func (ft FaultTimeline) mode() string {
	if ft.Cover == "" {
		return CoverFixed
	}
	return ft.Cover
}

// faultSpan is the end of the last fault of the list (the largest at + for).
func faultSpan(faults []Fault) Duration {
	var end Duration
	for _, f := range faults {
		end = max(end, f.At+f.For)
	}
	return end
}

// period is the length of one cycle: the explicit period, or the end of the last fault.
func (ft FaultTimeline) period(faults []Fault) Duration {
	if ft.Period > 0 {
		return ft.Period
	}
	return faultSpan(faults)
}

// expandFaults returns the injections a fault list makes over a load of the given
// duration. fixed: the list as it is. repeat: the list again every period, shifted by
// the period and named name#2, name#3, ...; an injection that would not end before the
// end of load is left out. scale: every at and for multiplied by duration / period. It is
// pure, and stops after MaxInjections + 1 injections (validation reports the excess).
func expandFaults(ft FaultTimeline, faults []Fault, duration Duration) []Fault {
	period := ft.period(faults)
	if len(faults) == 0 || period <= 0 || duration <= 0 {
		return faults
	}
	switch ft.mode() {
	case CoverRepeat:
		return repeatFaults(faults, period, duration)
	case CoverScale:
		return scaleFaults(faults, period, duration)
	}
	return faults
}

func repeatFaults(faults []Fault, period, duration Duration) []Fault {
	out := []Fault{}
	// offset goes negative if it overflows; a cycle with no injection ends the list (the
	// later ones start later still).
	for cycle, offset := 0, Duration(0); offset >= 0 && offset < duration; cycle, offset = cycle+1, offset+period {
		added := 0
		for _, f := range faults {
			if f.For <= 0 || f.At < 0 || f.At+offset+f.For > duration || f.At+offset+f.For < 0 {
				continue
			}
			g := f
			g.At += offset
			g.Params = maps.Clone(f.Params)
			if cycle > 0 {
				g.Name = fmt.Sprintf("%s#%d", f.Name, cycle+1)
			}
			out = append(out, g)
			added++
			if len(out) > MaxInjections {
				return out
			}
		}
		if added == 0 {
			break
		}
	}
	return out
}

func scaleFaults(faults []Fault, period, duration Duration) []Fault {
	factor := float64(duration) / float64(period)
	// Scaled times are cut to whole milliseconds (readable plans), downwards so that
	// nothing moves past the end of load.
	scale := func(d Duration) Duration {
		v := math.Min(float64(d)*factor, float64(duration))
		return Duration(time.Duration(v).Truncate(time.Millisecond))
	}
	out := make([]Fault, len(faults))
	for i, f := range faults {
		g := f
		g.At = min(scale(f.At), max(duration-1, 0))
		if f.For > 0 {
			// A scaled for never becomes 0: that would mean "held until the end of load".
			g.For = max(scale(f.At+f.For)-g.At, min(Duration(time.Millisecond), duration-g.At))
		}
		g.Params = maps.Clone(f.Params)
		out[i] = g
	}
	return out
}

// repeatCount is how many injections repeat makes of the fault list, counted without
// building them.
func repeatCount(faults []Fault, period, duration Duration) int64 {
	if period <= 0 {
		return 0
	}
	var n int64
	for _, f := range faults {
		if f.For <= 0 || f.At < 0 || f.At+f.For > duration {
			continue
		}
		n += int64((duration-f.At-f.For)/period) + 1
		if n > MaxInjections {
			return n
		}
	}
	return n
}

// FaultsLeftOut names the faults of the list as written that make no injection within
// the scenario's duration (a repeated timeline longer than the duration). The plan and
// validate print them.
func (sc *Scenario) FaultsLeftOut() []string {
	if sc.FaultTimeline.mode() != CoverRepeat {
		return nil
	}
	injected := map[string]bool{}
	for _, f := range sc.Faults {
		injected[f.Name] = true
	}
	var out []string
	for _, f := range sc.specFaults() {
		if !injected[f.Name] {
			out = append(out, f.Name)
		}
	}
	return out
}

// specFaults is the fault list as written (before expansion).
func (sc *Scenario) specFaults() []Fault {
	if sc.faultSpec != nil {
		return sc.faultSpec
	}
	return sc.Faults
}
