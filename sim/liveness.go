package sim

import (
	"context"
	"slices"
	"time"

	"pdsoak/harness/judge"
	"pdsoak/harness/phases"
	"pdsoak/harness/target"
	"pdsoak/server/api"
)

// Liveness on the virtual clock: every judge.ProbeInterval each process of the topology
// is asked whether it would answer its /health, and the answers go to the runner's
// prober (phases.Prober), so a process that dies and stays dead is a target_down the
// report judges as in a real run. Only the probe is simulated: a dead process refuses
// at once; a paused one keeps the probe waiting until it resumes (an answer) or
// judge.LivenessTimeout passes (none). The entry process's answers are also its health
// events (truthful_health), recorded by phases.Health as the runner's prober does: its
// /health status by the process's own rule (HealthAnswer), a refusal when it is dead,
// phases.ErrHealthTimeout when it is still paused phases.HealthTimeout later.

// HealthProber is implemented by a topology whose processes can be probed.
type HealthProber interface {
	// HealthSources lists the processes a run probes, in process order.
	HealthSources() []string
	// HealthState says whether a process runs and whether it is paused (SIGSTOP).
	HealthState(name string) (alive, paused bool)
	// HealthAnswer is what a running process's /health answers now: a status, or err
	// when it takes no connection.
	HealthAnswer(name string) (status int, err error)
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

// HealthAnswer implements HealthProber: the router's own rule (Routable, as
// Router.Healthy) or the worker's engine's, answered as server/api's /health answers;
// a router still in its first round of checks is not listening yet.
func (t *topo) HealthAnswer(name string) (int, error) {
	if name == ProcessRouter && t.router != nil {
		if t.router.starting {
			return 0, ErrConnRefused
		}
		return api.HealthStatus(t.router.Routable()), nil
	}
	if w := t.worker(name); w != nil {
		return api.HealthStatus(w.healthy()), nil
	}
	return 0, ErrConnRefused
}

// liveness is the simulated prober: the shared bookkeeping, since when a probe of each
// paused process waits (zero: none), and the entry's health events (entry: its index).
type liveness struct {
	hp      HealthProber
	names   []string
	p       *phases.Prober
	waiting []time.Time
	stop    func()
	health  *phases.Health
	entry   int
}

// startLiveness probes every process every judge.ProbeInterval from now on.
func (r *runner) startLiveness() {
	hp, ok := r.srv.(HealthProber)
	if !ok {
		return
	}
	names := hp.HealthSources()
	urls := make([]string, len(names))
	for i, n := range names {
		urls[i] = "sim://" + n + "/health"
	}
	lv := &liveness{hp: hp, names: names, p: phases.NewProber(names, urls, r.emit), waiting: make([]time.Time, len(names))}
	entry, _ := target.EntryHealth(r.sc, "")
	if lv.entry = slices.Index(names, entry); lv.entry >= 0 {
		lv.health = phases.NewHealth(entry, urls[lv.entry], r.emit)
	}
	r.live = lv
	lv.stop = r.loop.Every(judge.ProbeInterval, func(context.Context) {
		for i := range names {
			r.probeLive(i, false)
		}
	})
}

// probeLive asks process i. final: a last try once the faults are reverted, which
// does not wait for a paused process.
func (r *runner) probeLive(i int, final bool) {
	lv := r.live
	alive, paused := lv.hp.HealthState(lv.names[i])
	now := r.loop.Now()
	if i == lv.entry && !final && lv.health.On() {
		r.probeHealth(alive, paused)
	}
	switch {
	case paused && !final:
		if lv.waiting[i].IsZero() {
			lv.waiting[i] = now
		} else if now.Sub(lv.waiting[i]) >= judge.LivenessTimeout {
			lv.waiting[i] = time.Time{}
			lv.p.Observe(i, false)
		}
	default:
		lv.waiting[i] = time.Time{}
		lv.p.Observe(i, alive && !paused)
	}
}

// probeHealth records one probe of the entry's /health.
func (r *runner) probeHealth(alive, paused bool) {
	lv := r.live
	answer := func() {
		if alive, _ := lv.hp.HealthState(lv.names[lv.entry]); !alive {
			lv.health.Record(0, ErrConnRefused)
			return
		}
		lv.health.Record(lv.hp.HealthAnswer(lv.names[lv.entry]))
	}
	if !paused {
		answer()
		return
	}
	r.loop.After(phases.HealthTimeout, func() {
		if _, paused := lv.hp.HealthState(lv.names[lv.entry]); paused {
			lv.health.Record(0, phases.ErrHealthTimeout)
			return
		}
		answer() // resumed meanwhile: its answer (the real one comes at the resume)
	})
}

// stopHealth ends the health events (after the drain), as the runner's StopHealth.
func (r *runner) stopHealth() {
	if r.live != nil {
		r.live.health.Stop()
	}
}

// stopLiveness ends the probing (after the faults are reverted) and gives the processes
// their last say (phases.Prober.FinalTries), as the runner.
func (r *runner) stopLiveness() {
	lv := r.live
	if lv == nil || lv.stop == nil {
		return
	}
	lv.stop()
	lv.stop = nil
	if r.interrupted != nil {
		return
	}
	lv.p.FinalTries(r.loop, func(due []int) {
		for _, i := range due {
			r.probeLive(i, true)
		}
	})
}
