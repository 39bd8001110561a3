package judge

import (
	"fmt"
	"time"

	"pdsoak/ledger"
)

// Liveness: the target and every process of it are asked for their health endpoint
// through the run, and each change of mind is a target_down or target_up event. Down
// means no HTTP answer at all (refused, reset, or silent past LivenessTimeout) on
// LivenessFailures probes in a row: a 503 from /health is a live process saying it is
// unwell, which the other assertions judge. The runner probes over HTTP, the simulator
// asks its virtual processes; both fold the answers with Liveness and write
// LivenessEvent, so a process that dies in a simulated run is seen as in a real one.
const (
	// ProbeInterval is the period of the health probes: reports.HealthWindow (2 s) holds
	// four of the entry's, and LivenessFailures of them make a source down.
	ProbeInterval = 500 * time.Millisecond
	// LivenessTimeout bounds one probe; generous, so a loaded server is not called dead.
	LivenessTimeout = 10 * time.Second
	// LivenessFailures is how many failed probes in a row make a source down.
	LivenessFailures = 2
	// LivenessFinalTries are the last probes once the faults are reverted,
	// LivenessFinalGap apart: every source gets the first (one that died since its last
	// probe has not failed one yet), a failing or down one all: did it come back, or is
	// it gone?
	LivenessFinalTries = 3
	LivenessFinalGap   = time.Second
)

// Liveness is one source's liveness, a pure state machine: Observe says whether a
// probe result changes what the ledger should say.
type Liveness struct {
	fails int
	down  bool
}

// Observe folds one probe (ok: an HTTP answer came) and returns the event type to
// write, if any.
func (s *Liveness) Observe(ok bool) (ledger.EventType, bool) {
	if ok {
		s.fails = 0
		if s.down {
			s.down = false
			return ledger.EventTargetUp, true
		}
		return "", false
	}
	s.fails++
	if !s.down && s.fails >= LivenessFailures {
		s.down = true
		return ledger.EventTargetDown, true
	}
	return "", false
}

// Failing reports whether the last probe failed (down, or on its way there).
func (s *Liveness) Failing() bool { return s.fails > 0 }

// Down reports whether the source is down.
func (s *Liveness) Down() bool { return s.down }

// LivenessEvent is the target_down or target_up event (typ) of source at url.
func LivenessEvent(typ ledger.EventType, source, url string) ledger.Event {
	msg := source + " answers its health probe again"
	if typ == ledger.EventTargetDown {
		msg = fmt.Sprintf("%s does not answer its health probe (%s) %d times in a row", source, url, LivenessFailures)
	}
	return ledger.Event{Type: typ, Source: source, URL: url, Message: msg}
}
