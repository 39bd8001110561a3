package judge

import (
	"fmt"
	"time"

	"pdsoak/ledger"
)

// The ledger events of the run's own checks, built once for the runner and the
// simulator, so that a simulated ledger says what a real one says.

// Details of a leak check that could not be evaluated at all.
const (
	LeakInterrupted = "not evaluated: the run was interrupted"
	LeakNoMetrics   = "not evaluated: the target has no metrics endpoint"
)

// LeakCheckEvent is leak_check for verdict v of a check started at started; a verdict
// not evaluated has no Passed (neither a pass nor a fail).
func LeakCheckEvent(started time.Time, v LeakVerdict) ledger.Event {
	ev := ledger.Event{Type: ledger.EventLeakCheck, Started: &started, Detail: v.Detail, Metrics: v.Residual}
	if v.Evaluated {
		ev.Passed = ledger.Bool(v.Passed)
	}
	return ev
}

// DrainBound is how long the drain lets in-flight requests run to their own deadlines:
// the scenario's drain timeout, or cancelDrain once the run was interrupted.
func DrainBound(timeout, cancelDrain time.Duration, interrupted bool) time.Duration {
	if interrupted {
		return cancelDrain
	}
	return timeout
}

// DrainEvent is the drain event: whether every request resolved within bound (took is
// how long that took), else how many were still in flight and cancelled.
func DrainEvent(drained bool, left int, took, bound time.Duration, interrupted bool) ledger.Event {
	detail := fmt.Sprintf("all requests resolved %v after load stopped", took.Round(time.Millisecond))
	if !drained {
		detail = fmt.Sprintf("%d requests still in flight after %v; cancelled", left, bound)
	}
	if interrupted {
		detail = "interrupted: " + detail
	}
	return ledger.Event{Type: ledger.EventDrain, InFlight: left, Passed: ledger.Bool(drained), Detail: detail}
}

// SampleEvent is a sample of process's metrics: the gauges IsSampleGauge keeps.
func SampleEvent(process string, metrics map[string]float64) ledger.Event {
	m := map[string]float64{}
	for name, x := range metrics {
		if IsSampleGauge(name) {
			m[name] = x
		}
	}
	return ledger.Event{Type: ledger.EventSample, Source: process, Metrics: m}
}

// Event is self_check for s.
func (s SelfCheck) Event() ledger.Event {
	return ledger.Event{Type: ledger.EventSelfCheck, Passed: ledger.Bool(s.Passed),
		LagP99: max(s.SendP99, s.TickP99).Seconds(), LagMax: max(s.SendMax, s.TickMax).Seconds(), Detail: s.Detail()}
}
