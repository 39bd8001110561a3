package sim

import (
	"context"
	"time"

	"pdsoak/harness/judge"
	"pdsoak/harness/phases"
)

// Liveness on the virtual clock: every judge.ProbeInterval each process of the topology
// is asked whether it would answer its /health, and the answers go to the runner's
// prober (phases.Prober), so a process that dies and stays dead is a target_down the
// report judges as in a real run. Only the probe is simulated: a dead process refuses
// at once; a paused one keeps the probe waiting until it resumes (an answer) or
// judge.LivenessTimeout passes (none).

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

// liveness is the simulated prober: the shared bookkeeping, and since when a probe of
// each paused process waits (zero: none).
type liveness struct {
	hp      HealthProber
	names   []string
	p       *phases.Prober
	waiting []time.Time
	stop    func()
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

// stopLiveness ends the probing (after the faults are reverted) and gives each process
// that is down its last chances (phases.Prober.FinalTries), as the runner.
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
	lv.p.FinalTries(r.loop, func(down []int) {
		for _, i := range down {
			r.probeLive(i, true)
		}
	})
}
