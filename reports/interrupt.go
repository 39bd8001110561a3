package reports

import "strings"

// judgedOnEvidence decides an interrupted run (or one cut short: no run_end) that
// already holds a silent drop: the evidence is definitive, so the run is FAIL rather
// than INVALID, as long as every reason to distrust it comes from the interrupt itself
// (the interrupt, and what it left not evaluated) and an assertion failed. The reasons
// then become notes. It reports whether it did so.
func (b *Builder) judgedOnEvidence(r *Results) bool {
	if (b.interrupt == "" && !b.cutShort()) || r.SilentDrops == 0 {
		return false
	}
	if len(r.Failed()) == 0 {
		return false // no assertion judges the drop: a FAIL would name no failure (junit.xml green)
	}
	for _, why := range r.InvalidReasons {
		if !strings.HasPrefix(why, "interrupted before the run completed") && !strings.Contains(why, " not evaluated: ") {
			return false
		}
	}
	for _, why := range r.InvalidReasons {
		r.Notes = append(r.Notes, "judged on its evidence although "+why)
	}
	r.InvalidReasons = nil
	return true
}
