package failpoint

import "strings"

// State is one failpoint's terms and counters as Enable and Disable leave them, the one
// rule of the registry's points and of the simulator's (sim): Enable installs new terms
// and restarts the counts; Disable clears the terms and keeps the counts readable until
// the next Enable. Its holder guards it (a registry point with its lock, the simulator
// on its event loop).
type State struct {
	Tally
	enabled bool
	terms   string
	chain   []Term // counts are decremented in place
}

// Enable installs chain, parsed from terms, and restarts the counts.
func (s *State) Enable(terms string, chain []Term) {
	s.enabled, s.terms, s.chain = true, strings.TrimSpace(terms), chain
	s.Reset()
}

// Disable clears the terms; the counts stay until the next Enable.
func (s *State) Disable() { s.enabled, s.terms, s.chain = false, "", nil }

// Enabled reports whether terms are installed.
func (s *State) Enabled() bool { return s.enabled }

// Terms is the chain as given to Enable; empty when disabled.
func (s *State) Terms() string { return s.terms }

// Fire evaluates the terms, counted by the Tally (Eval); nil when disabled, when none
// fired or when an "off" term did.
func (s *State) Fire(draw func(percent float64) bool) *Term {
	if !s.enabled {
		return nil
	}
	return s.Eval(s.chain, draw)
}

// Describe is the failpoint's Status under name.
func (s *State) Describe(name string) Status { return s.Status(name, s.terms, s.enabled) }
