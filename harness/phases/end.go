package phases

// End is the order in which a run ends after its load window, one description the
// runner and the simulator both follow: the drain; the prefill counters' last reading;
// no health event after the drain; the watches over requests in flight stop (nothing
// is in flight any more); every fault reverted; a last probe once they are; no sample
// after the drain; the leak check; the self-check. A nil step is one that driver does
// not have.
type End struct {
	Drain        func()
	StopPD       func()
	StopHealth   func()
	StopWatches  func()
	StopFaults   func() error
	StopProbes   func()
	StopSamplers func()
	CheckLeaks   func()
	SelfCheck    func() error
}

// Run takes the steps in order and returns the faults' error and the self-check's.
func (e End) Run() (faultErr, selfErr error) {
	for _, f := range []func(){e.Drain, e.StopPD, e.StopHealth, e.StopWatches} {
		if f != nil {
			f()
		}
	}
	if e.StopFaults != nil {
		faultErr = e.StopFaults()
	}
	for _, f := range []func(){e.StopProbes, e.StopSamplers, e.CheckLeaks} {
		if f != nil {
			f()
		}
	}
	if e.SelfCheck != nil {
		selfErr = e.SelfCheck()
	}
	return faultErr, selfErr
}
