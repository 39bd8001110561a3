package phases

import (
	"fmt"
	"time"

	"pdsoak/ledger"
)

// Start is the order in which a run opens its load window, one description the runner
// and the simulator both follow (End is the order of its close): the samplers first,
// so that every instant of the load is sampled and the self-check's ticker runs before
// the first request; the prefill counters' first reading (pd_path counts from it); the
// watches over requests in flight; the health probes; then the load itself: the window
// opens (its t0 and LoadStartedEvent), the fault timeline and every workload start at
// t0, and the window runs. A nil step is one that driver does not have.
type Start struct {
	Samplers func()
	PD       func()
	Watches  func()
	Probes   func()
	Open     func()
	// Faults is nil when the run has no faults: the window then closes as soon as every
	// workload is done.
	Faults    func()
	Workloads func()
	// Window waits for the load window to close: at its end when toEnd (a fault timeline
	// plays out over the whole duration), else at its end or once every workload is done,
	// whichever is first.
	Window func(toEnd bool)
}

// Run takes the steps in order.
func (s Start) Run() {
	for _, f := range []func(){s.Samplers, s.PD, s.Watches, s.Probes, s.Open, s.Faults, s.Workloads} {
		if f != nil {
			f()
		}
	}
	if s.Window != nil {
		s.Window(s.Faults != nil)
	}
}

// LoadStartedEvent is the log line that opens the load window at t0: n workloads for
// the scenario's duration d.
func LoadStartedEvent(t0 time.Time, n int, d time.Duration) ledger.Event {
	return ledger.Event{Time: t0, Type: ledger.EventLog, Message: fmt.Sprintf("load started: %d workloads for %v", n, d)}
}
