package sim

import (
	"time"

	"pdsoak/harness/judge"
)

// Liveness on the virtual clock: every judge.ProbeInterval each process of the topology
// is asked whether it would answer its /health, and the answers go through the
// runner's rule (judge.Liveness), so a process that dies and stays dead is a
// target_down the report judges as in a real run (target_alive, explained_errors).
// Only the probe is simulated: a dead process refuses at once; a paused one keeps the
// probe waiting until it resumes (an answer) or judge.LivenessTimeout passes (none).

// HealthProber is implemented by a topology whose processes can be probed.
type HealthProber interface {
	// HealthSources lists the processes a run probes, in process order.
	HealthSources() []string
	// HealthState says whether a process runs and whether it is paused (SIGSTOP).
	HealthState(name string) (alive, paused bool)
}

// HealthSources implements HealthProber: the workers, then the router.
func (t *topo) HealthSources() []string {
	var out []string
	for _, w := range t.workers() {
		out = append(out, w.name)
	}
	if t.router != nil {
		out = append(out, ProcessRouter)
	}
	return out
}

// HealthState implements HealthProber.
func (t *topo) HealthState(name string) (alive, paused bool) {
	if name == ProcessRouter && t.router != nil {
		return t.router.alive, t.router.paused
	}
	if w := t.worker(name); w != nil {
		return w.alive, w.paused
	}
	return false, false
}

// liveness is the simulated prober's state.
type liveness struct {
	hp      HealthProber
	names   []string
	states  []judge.Liveness
	waiting []time.Time // a probe of a paused process waits since then (zero: none)
	timer   *Timer
	stopped bool
}

// healthURL is the URL a simulated process's health probe names.
func healthURL(name string) string { return "sim://" + name + "/health" }

// startLiveness probes every process every judge.ProbeInterval from now on.
func (r *runner) startLiveness() {
	hp, ok := r.srv.(HealthProber)
	if !ok {
		return
	}
	lv := &liveness{hp: hp, names: hp.HealthSources()}
	lv.states = make([]judge.Liveness, len(lv.names))
	lv.waiting = make([]time.Time, len(lv.names))
	r.live = lv
	var tick func()
	tick = func() {
		if lv.stopped {
			return
		}
		for i := range lv.names {
			r.probeLive(i, false)
		}
		lv.timer = r.loop.After(judge.ProbeInterval, tick)
	}
	lv.timer = r.loop.After(judge.ProbeInterval, tick)
}

// probeLive asks process i. final: a last try once the faults are reverted, which
// does not wait for a paused process.
func (r *runner) probeLive(i int, final bool) {
	lv := r.live
	alive, paused := lv.hp.HealthState(lv.names[i])
	now := r.loop.Now()
	switch {
	case !alive:
		lv.waiting[i] = time.Time{}
		r.liveObserve(i, false)
	case paused && !final:
		if lv.waiting[i].IsZero() {
			lv.waiting[i] = now
		} else if now.Sub(lv.waiting[i]) >= judge.LivenessTimeout {
			lv.waiting[i] = time.Time{}
			r.liveObserve(i, false)
		}
	case paused:
		r.liveObserve(i, false)
	default:
		lv.waiting[i] = time.Time{}
		r.liveObserve(i, true)
	}
}

func (r *runner) liveObserve(i int, ok bool) {
	lv := r.live
	if typ, changed := lv.states[i].Observe(ok); changed {
		r.emit(judge.LivenessEvent(typ, lv.names[i], healthURL(lv.names[i])))
	}
}

// stopLiveness ends the probing (after the faults are reverted) and, as the runner,
// gives each process that is down judge.LivenessFinalTries last chances,
// judge.LivenessFinalGap apart.
func (r *runner) stopLiveness() {
	lv := r.live
	if lv == nil || lv.stopped {
		return
	}
	lv.stopped = true
	r.loop.Stop(lv.timer)
	if r.interrupted != nil {
		return
	}
	for try := 0; try < judge.LivenessFinalTries; try++ {
		if try > 0 {
			r.loop.RunUntil(r.loop.Now().Add(judge.LivenessFinalGap))
		}
		any := false
		for i := range lv.names {
			if lv.states[i].Down() {
				r.probeLive(i, true)
				any = any || lv.states[i].Down()
			}
		}
		if !any {
			return
		}
	}
}
