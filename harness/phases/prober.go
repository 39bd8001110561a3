package phases

import (
	"pdsoak/harness/judge"
	"pdsoak/ledger"
)

// Prober is the health prober's bookkeeping: one judge.Liveness per source, folded
// from each probe's answer, and a target_down or target_up event on each change of
// mind. Its methods on one source must not run concurrently (one probe of a source at
// a time); different sources may.
type Prober struct {
	names, urls []string
	states      []judge.Liveness
	emit        func(ledger.Event)
	// OnChange, when set, hears of every event before it is written (the runner logs).
	OnChange func(ev ledger.Event)
}

// NewProber follows the sources names (their health URLs urls).
func NewProber(names, urls []string, emit func(ledger.Event)) *Prober {
	return &Prober{names: names, urls: urls, states: make([]judge.Liveness, len(names)), emit: emit}
}

// Len is the number of sources.
func (p *Prober) Len() int { return len(p.names) }

// Observe folds a probe of source i (ok: an HTTP answer came).
func (p *Prober) Observe(i int, ok bool) {
	typ, changed := p.states[i].Observe(ok)
	if !changed {
		return
	}
	ev := judge.LivenessEvent(typ, p.names[i], p.urls[i])
	if p.OnChange != nil {
		p.OnChange(ev)
	}
	p.emit(ev)
}

// Down reports whether source i is down.
func (p *Prober) Down(i int) bool { return p.states[i].Down() }

// FinalTries gives the sources their last say once the faults are reverted: every
// source is asked once (one that died after its last periodic probe, as the load
// ended, has not failed a probe yet and would pass for alive), then each that is
// failing or down is asked again, judge.LivenessFinalTries times in all,
// judge.LivenessFinalGap apart: did it come back, or is it gone? probe asks the sources
// given (all of them at once) and Observes the answers.
func (p *Prober) FinalTries(clk Clock, probe func(sources []int)) {
	for try := 0; try < judge.LivenessFinalTries; try++ {
		var due []int
		for i := range p.names {
			if try == 0 || p.states[i].Failing() {
				due = append(due, i)
			}
		}
		if len(due) == 0 || (try > 0 && !clk.Sleep(judge.LivenessFinalGap)) {
			return
		}
		probe(due)
	}
}
