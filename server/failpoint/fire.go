package failpoint

// Fire picks the term of chain that fires on one evaluation, as Eval does: the first
// term whose count is not exhausted and whose percentage draw (draw(percent) reports
// whether a draw under percent succeeded) hits; its count is decremented in place. nil:
// nothing fired. The simulator (sim) evaluates its modelled failpoints with it.
func Fire(chain []Term, draw func(percent float64) bool) *Term {
	for i := range chain {
		t := &chain[i]
		if t.HasCount && t.Count <= 0 {
			continue
		}
		if t.HasPercent && !draw(t.Percent) {
			continue
		}
		if t.HasCount {
			t.Count--
		}
		return t
	}
	return nil
}

// Draw is one percentage draw: whether u (uniform in [0, 1)) falls under percent; 100
// or more always hits and 0 or less never does, without drawing. The registry draws
// from its seeded generator, the simulator from the scenario's.
func Draw(percent float64, u func() float64) bool {
	if percent >= 100 {
		return true
	}
	if percent <= 0 {
		return false
	}
	return u()*100 < percent
}
