package api

import "strings"

// stopMatcher finds stop strings in streamed text. It holds back the shortest tail that
// could still be the start of a stop string, so text it has released never contains (or
// begins) a match: the concatenation of released text is the output up to, and without,
// the first stop string.
type stopMatcher struct {
	stops   []string
	pending string
	matched bool
}

// push adds text and returns what can be released. matched reports that a stop string
// was found; the text after it is dropped and further pushes return nothing.
func (m *stopMatcher) push(s string) (out string, matched bool) {
	if m.matched {
		return "", true
	}
	if len(m.stops) == 0 {
		return s, false
	}
	m.pending += s
	first := -1
	for _, stop := range m.stops {
		if i := strings.Index(m.pending, stop); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		out, m.pending, m.matched = m.pending[:first], "", true
		return out, true
	}
	hold := 0
	for _, stop := range m.stops {
		// The longest suffix of pending that is a proper prefix of stop.
		for k := min(len(stop)-1, len(m.pending)); k > hold; k-- {
			if strings.HasSuffix(m.pending, stop[:k]) {
				hold = k
				break
			}
		}
	}
	cut := len(m.pending) - hold
	out, m.pending = m.pending[:cut], m.pending[cut:]
	return out, false
}

// flush releases the held-back tail at the end of the stream.
func (m *stopMatcher) flush() string {
	out := m.pending
	m.pending = ""
	return out
}
