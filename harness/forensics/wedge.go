package forensics

import (
	"fmt"
	"time"
)

// Detector judges a run wedged: requests in flight, none completing for After, and the
// GPUs idle where that is known. It is a pure state machine: the caller brings the
// clock and the readings. It fires once per wedge and re-arms when a request completes
// or nothing is in flight.
type Detector struct {
	After time.Duration

	completed int64
	since     time.Time // last progress (or the first observation)
	started   bool
	fired     bool
}

// Reading is one observation.
type Reading struct {
	Now       time.Time
	InFlight  int
	Completed int64 // requests completed so far (any outcome)
	// GPUIdle is nil when unknown (no NVML): the judgement then rests on the requests.
	GPUIdle *bool
}

// Observe feeds one reading; it returns a non-empty reason when the run has just
// been judged wedged.
func (d *Detector) Observe(r Reading) string {
	if d.After <= 0 {
		return ""
	}
	if !d.started || r.Completed != d.completed || r.InFlight == 0 {
		d.started, d.completed, d.since, d.fired = true, r.Completed, r.Now, false
		return ""
	}
	stuck := r.Now.Sub(d.since)
	if d.fired || stuck < d.After {
		return ""
	}
	if r.GPUIdle != nil && !*r.GPUIdle {
		return "" // the GPUs are busy: a long prefill, not a wedge
	}
	d.fired = true
	reason := fmt.Sprintf("%d requests in flight, none completed for %v", r.InFlight, stuck.Round(time.Second))
	if r.GPUIdle != nil {
		reason += ", GPUs idle"
	}
	return reason
}
