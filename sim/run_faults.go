package sim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"pdsoak/chaos"
	"pdsoak/harness/client"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// The fault timeline on the virtual clock, as chaos.Timeline orders it: each fault is
// applied at its at and reverted at at+for (held to the end of the drain when for is
// 0); steps at one instant run reverts first, then in spec order. Server-side faults go
// to Server.Fault; the client-side ones (client_disconnect, and the load bursts
// queue_saturation and kv_pool_exhaustion) are the chaos package's own faults acting on
// the simulated client through a chaos.Env.

type faultEntry struct {
	spec   scenarios.Fault
	fault  chaos.Fault // every fault's params are checked by chaos; client faults run it
	client bool
	active bool
	stop   func() // a server fault's revert
	seq    int    // application order, for the reverts at the end
	// verifying is the next Verify poll of a client fault (nil or stopped: none).
	verifying *Timer
}

// prepareFaults builds every fault (bad params are the scenario's problem, as in a real
// run) and asks the topology whether it can model each server-side one.
func (r *runner) prepareFaults() error {
	var errs []error
	for i, s := range r.sc.Faults {
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s-%d", s.Type, i)
		}
		f, err := chaos.New(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("sim: faults: %w", err))
			continue
		}
		e := &faultEntry{spec: s, fault: f, client: IsClientSide(s)} // acts through Env.Load or Env.Disconnect
		if !e.client {
			if err := r.srv.CanModel(s); err != nil {
				if !errors.Is(err, ErrNotModelled) {
					err = fmt.Errorf("%w: %w", ErrNotModelled, err)
				}
				errs = append(errs, fmt.Errorf("sim: fault %s (%s): %w", s.Name, s.Type, err))
				continue
			}
		}
		r.faults = append(r.faults, e)
	}
	return errors.Join(errs...)
}

// startFaults schedules every step of the timeline from t0, in chaos.Schedule's order.
func (r *runner) startFaults() {
	specs := make([]scenarios.Fault, len(r.faults))
	for i, e := range r.faults {
		specs[i] = e.spec
	}
	for _, s := range chaos.Schedule(specs) {
		e := r.faults[s.Index]
		if s.Kind == chaos.StepRevert {
			r.loop.At(r.t0.Add(s.At), func() { r.revertFault(e) })
		} else {
			r.loop.At(r.t0.Add(s.At), func() { r.applyFault(e) })
		}
	}
}

func (r *runner) faultEvent(typ ledger.EventType, e *faultEntry) ledger.Event {
	return chaos.FaultEvent(typ, e.spec)
}

// applyFault applies one fault, emits fault_start and proves it (fault_verified).
func (r *runner) applyFault(e *faultEntry) {
	if r.faultErr != nil || r.interrupted != nil {
		return // a failed fault stops the timeline, as chaos.Timeline does
	}
	var err error
	if e.client {
		err = e.fault.Apply(context.Background(), r.env())
	} else {
		e.stop, err = r.srv.Fault(e.spec)
	}
	start := r.faultEvent(ledger.EventFaultStart, e)
	if err != nil {
		start.Error = err.Error()
		r.emit(start)
		ev := r.faultEvent(ledger.EventFaultVerified, e)
		ev.Passed, ev.Error, ev.Detail = ledger.Bool(false), err.Error(), "apply failed"
		r.emit(ev)
		r.failFaults(chaos.ApplyFailedError(e.spec.Name, err))
		return
	}
	r.faultSeq++
	e.active, e.seq = true, r.faultSeq
	r.emit(start)
	if !e.client {
		// The model applies a fault by construction: its proof is the model's state.
		ev := r.faultEvent(ledger.EventFaultVerified, e)
		ev.Passed = ledger.Bool(true)
		ev.Detail = fmt.Sprintf("simulated: %s applied to %s", e.spec.Type, e.spec.Target)
		r.emit(ev)
		return
	}
	r.verifyFault(e, r.loop.Now(), chaos.VerifyFirstInterval)
}

// verifyFault polls a client fault's Verify as chaos.Timeline does
// (chaos.NextVerifyInterval), bounded by chaos.VerifyBound.
func (r *runner) verifyFault(e *faultEntry, started time.Time, interval time.Duration) {
	if !e.active {
		return // reverted first: its revert step reported it
	}
	err := e.fault.Verify(context.Background(), r.env())
	if err == nil {
		ev := r.faultEvent(ledger.EventFaultVerified, e)
		ev.Passed = ledger.Bool(true)
		if ev2, ok := e.fault.(chaos.Evidencer); ok {
			ev.Detail = ev2.Evidence()
		}
		r.emit(ev)
		return
	}
	deadline, why := chaos.VerifyBound(e.spec, r.t0, started, r.opts.VerifyTimeout)
	next := r.loop.Now().Add(interval)
	if !next.Before(deadline) {
		// The next poll would come too late: no proof.
		r.loop.At(deadline, func() {
			if !e.active && r.faultErr != nil {
				return
			}
			ev := r.faultEvent(ledger.EventFaultVerified, e)
			ev.Passed, ev.Error, ev.Detail = ledger.Bool(false), err.Error(), "no proof "+why
			r.emit(ev)
			r.failFaults(chaos.NotVerifiedError(why, e.spec.Name, err))
		})
		return
	}
	e.verifying = r.loop.At(next, func() { r.verifyFault(e, started, chaos.NextVerifyInterval(interval)) })
}

// revertFault reverts an applied fault and emits fault_stop.
func (r *runner) revertFault(e *faultEntry) {
	if !e.active {
		return
	}
	e.active = false
	r.loop.Stop(e.verifying)
	var err error
	if e.client {
		err = e.fault.Revert(context.Background(), r.env())
	} else if e.stop != nil {
		e.stop()
	}
	ev := r.faultEvent(ledger.EventFaultStop, e)
	if err != nil {
		ev.Error = err.Error()
		r.emit(ev)
		r.failFaults(fmt.Errorf("chaos: revert %s: %w", e.spec.Name, err))
		return
	}
	r.emit(ev)
}

// failFaults records the timeline's first failure and reverts every applied fault,
// latest first.
func (r *runner) failFaults(err error) {
	if r.faultErr != nil {
		return
	}
	r.faultErr = err
	r.emit(ledger.Event{Type: ledger.EventLog, Message: "fault timeline failed: " + err.Error()})
	r.revertAll()
}

func (r *runner) revertAll() {
	active := make([]*faultEntry, 0, len(r.faults))
	for _, e := range r.faults {
		if e.active {
			active = append(active, e)
		}
	}
	sort.Slice(active, func(i, j int) bool { return active[i].seq > active[j].seq })
	for _, e := range active {
		r.revertFault(e)
	}
}

// stopFaults reverts what is still applied after the drain (faults held to the end) and
// says whether the timeline failed: a fault not applied, proved or reverted makes the
// run invalid (ErrInfrastructure), except after an interruption.
func (r *runner) stopFaults() error {
	for _, e := range r.faults {
		if e.active && e.verifying.Pending() {
			// Still unproved when the run ends.
			r.loop.Stop(e.verifying)
			ev := r.faultEvent(ledger.EventFaultVerified, e)
			ev.Passed, ev.Detail = ledger.Bool(false), "no proof before the run ended"
			r.emit(ev)
			if r.faultErr == nil {
				r.faultErr = fmt.Errorf("%w before the run ended: %s", chaos.ErrNotVerified, e.spec.Name)
			}
		}
	}
	r.revertAll()
	if r.faultErr == nil || r.interrupted != nil {
		return nil
	}
	return fmt.Errorf("sim: faults: %w: %w", r.faultErr, ErrInfrastructure)
}

// env is the chaos.Env the client-side faults act through.
func (r *runner) env() chaos.Env {
	topo := r.sc.Topology()
	return &chaos.FuncEnv{
		MembersFunc: topo.Members,
		LoadFunc:    r.load,
		DisconnectFunc: func(_ context.Context, target string, d chaos.Disconnect) (chaos.Run, error) {
			return r.disconnectRun(target, d), nil
		},
		ScrapeFunc: func(_ context.Context, process string) (map[string]float64, error) {
			for _, s := range r.sources {
				if s == process {
					if m, ok := r.srv.Gauges()[process]; ok {
						return m, nil
					}
					return nil, fmt.Errorf("sim: %s is not answering", process)
				}
			}
			return nil, fmt.Errorf("sim: no metrics endpoint for %q: %w", process, chaos.ErrUnsupported)
		},
		EmitFunc: r.emit,
	}
}

// extra is a request factory for a fault's extra requests (chaos.ExtraPrefix).
func (r *runner) extra(spec scenarios.Workload, kind string) *workload.Common {
	r.burstSeq++
	return workload.Extra(r.sc, spec, chaos.ExtraPrefix(spec.Name, kind, r.burstSeq))
}

// load implements chaos.Env.Load: a burst of extra requests, all scheduled at its start,
// at most Concurrency in flight; Stop cancels what is in flight and sends no more.
func (r *runner) load(_ context.Context, target string, b chaos.Burst) (chaos.Run, error) {
	spec := chaos.WorkloadFor(r.sc, target)
	if b.PromptTokens > 0 {
		spec.PromptTokens = b.PromptTokens
	}
	if b.MaxTokens > 0 {
		spec.MaxTokens = b.MaxTokens
	}
	return r.sendMany(r.extra(spec, "burst"), b.Requests, b.Concurrency, 0), nil
}

// disconnectRun implements chaos.Env.Disconnect: extra streams that cancel themselves
// after k tokens, or a rule on the workloads' own streams until Stop.
func (r *runner) disconnectRun(target string, d chaos.Disconnect) chaos.Run {
	if d.Requests > 0 {
		spec := chaos.WorkloadFor(r.sc, target)
		spec.Stream = true
		return r.sendMany(r.extra(spec, "abort"), d.Requests, 0, max(d.AfterTokens, 1))
	}
	st := &chaos.LiveStats{}
	r.disconnect.Set(target, max(d.AfterTokens, 1), d.Fraction, st)
	return chaos.FuncRun{StatsFunc: st.Snapshot, StopFunc: func() { r.disconnect.Set(target, 0, 0, nil) }}
}

// sendMany sends n requests from c, conc at most in flight (0: all), counted in the
// returned Run's statistics.
func (r *runner) sendMany(c *workload.Common, n, conc, cancelAfter int) chaos.Run {
	st := &chaos.LiveStats{}
	if conc <= 0 || conc > n {
		conc = n
	}
	now := r.loop.Now()
	var mine []*call
	stopped := false
	next := 0
	var fire func()
	fire = func() {
		if stopped || next >= n {
			return
		}
		seq := uint64(next)
		next++
		st.Sent.Add(1)
		req := c.Single(seq, now)
		req.CancelAfterTokens = cancelAfter
		mine = append(mine, r.send(req, true, false, st, func(*client.Result) { fire() }))
	}
	for i := 0; i < conc; i++ {
		fire()
	}
	return chaos.FuncRun{StatsFunc: st.Snapshot, StopFunc: func() {
		stopped = true
		for _, c := range mine {
			c.cancelled()
		}
	}}
}
