package sim

import (
	"context"
	"fmt"

	"pdsoak/harness/phases"
)

// startPDCounters reads the scenario's prefill counters (pd_path) as the real harness
// does (phases.WatchPD). Only the reference server's counter is modelled: a process
// that does not answer (crashed, paused) gets an event with Error.
func (r *runner) startPDCounters() {
	counters := r.sc.PDCounters()
	r.stopPD = phases.WatchPD(r.loop, counters, func(context.Context) {
		g := r.srv.Gauges()
		for _, c := range counters {
			v, ok := g[c.Process][c.Selector.Name]
			var err error
			if !ok || len(c.Selector.Labels) > 0 {
				err = fmt.Errorf("sim: %s does not answer %s", c.Process, c.Selector.String())
			}
			r.emit(phases.PDCounterEvent(c, v, err))
		}
	})
}
