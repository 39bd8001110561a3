package reports

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

func (b *Builder) faultResults() []FaultResult {
	sort.SliceStable(b.samples, func(i, j int) bool { return b.samples[i].at.Before(b.samples[j].at) })
	out := make([]FaultResult, 0, len(b.faults))
	for _, f := range b.faults {
		res := f.res
		if !f.start.IsZero() {
			res.Start = f.start.Sub(b.start).Seconds()
		}
		if !f.stop.IsZero() {
			res.Stop = Float(f.stop.Sub(b.start).Seconds())
			res.Recovered, res.TimeToRecover = b.recover(f.stop)
		}
		out = append(out, res)
	}
	return out
}

// recover finds the first window after stop whose success rate reaches the threshold.
func (b *Builder) recover(stop time.Time) (*bool, *float64) {
	rc := b.cfg.Recovery
	i0 := sort.Search(len(b.samples), func(i int) bool { return !b.samples[i].at.Before(stop) })
	after := b.samples[i0:]
	if len(after) == 0 {
		return nil, nil
	}
	need := min(rc.MinRequests, len(after))
	j, ok := 0, 0
	for i := range after {
		if after[i].at.Sub(stop) > rc.Within {
			break
		}
		for j < len(after) && after[j].at.Sub(after[i].at) < rc.Window {
			if after[j].ok {
				ok++
			}
			j++
		}
		n := j - i
		if n >= need && float64(ok)/float64(n) >= rc.Threshold {
			return ledger.Bool(true), Float(after[i].at.Sub(stop).Seconds())
		}
		if after[i].ok {
			ok--
		}
	}
	return ledger.Bool(false), nil
}

// recoveryVerdict fails when any fault's success rate did not recover; otherwise it is
// not evaluated when no fault was injected or one could not be measured.
func (b *Builder) recoveryVerdict(faults []FaultResult) (State, string) {
	if len(faults) == 0 {
		return StateNotEvaluated, "no fault was injected, so there is nothing to recover from"
	}
	rc := b.cfg.Recovery
	state := StatePass
	var parts []string
	for _, f := range faults {
		switch {
		case f.Stop == nil:
			parts = append(parts, f.Name+": never reverted during load (not measurable)")
			if state == StatePass {
				state = StateNotEvaluated
			}
		case f.Recovered == nil:
			parts = append(parts, f.Name+": no requests after it stopped (not measurable)")
			if state == StatePass {
				state = StateNotEvaluated
			}
		case *f.Recovered:
			parts = append(parts, fmt.Sprintf("%s: recovered in %s", f.Name, format.Seconds(*f.TimeToRecover)))
		default:
			state = StateFail
			parts = append(parts, fmt.Sprintf("%s: success rate stayed below %g over %s windows for %s", f.Name, rc.Threshold, rc.Window, rc.Within))
		}
	}
	return state, strings.Join(parts, "; ")
}
