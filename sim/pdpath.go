package sim

import (
	"time"

	"pdsoak/ledger"
)

// pdCounterEvery is the harness's reading interval of the prefill counters
// (harness/pdwatch.go).
const pdCounterEvery = 500 * time.Millisecond

// pdReader reads the scenario's prefill counters (pd_path) as the real harness does: at
// the start of load, every pdCounterEvery, and after the drain. Only the reference
// server's counter is modelled (the simulated workers export no other).
type pdReader struct {
	timer   *Timer
	stopped bool
}

func (r *runner) startPDCounters() {
	if len(r.sc.PDCounters()) == 0 {
		return
	}
	r.readPDCounters()
	var tick func()
	tick = func() {
		if r.pd.stopped {
			return
		}
		r.readPDCounters()
		r.pd.timer = r.loop.After(pdCounterEvery, tick)
	}
	r.pd.timer = r.loop.After(pdCounterEvery, tick)
}

func (r *runner) stopPDCounters() {
	if r.pd.stopped || len(r.sc.PDCounters()) == 0 {
		return
	}
	r.pd.stopped = true
	r.loop.Stop(r.pd.timer)
	r.readPDCounters()
}

// readPDCounters writes one pd_counter event per prefill counter; a process that does
// not answer (crashed, paused) gets one with Error.
func (r *runner) readPDCounters() {
	g := r.srv.Gauges()
	for _, c := range r.sc.PDCounters() {
		ev := ledger.Event{Type: ledger.EventPDCounter, Source: c.Process, Detail: c.Selector.String()}
		if v, ok := g[c.Process][c.Selector.Name]; ok && len(c.Selector.Labels) == 0 {
			ev.Metrics = map[string]float64{c.Selector.String(): v}
		} else {
			ev.Error = "sim: " + c.Process + " does not answer " + c.Selector.String()
		}
		r.emit(ev)
	}
}
