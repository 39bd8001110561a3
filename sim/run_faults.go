package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"pdsoak/chaos"
	"pdsoak/harness/client"
	"pdsoak/harness/phases"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// The fault timeline is the real one: chaos.Sequencer, driven on the virtual clock
// (simRuntime), its calls returning at once. Client-side faults (client_disconnect, the
// load bursts queue_saturation and kv_pool_exhaustion) are chaos's own faults acting on
// the simulated client through a chaos.Env; a server-side one is a modelFault, which
// Server.Fault carries out.

// prepareFaults builds every fault (bad params are the scenario's problem, as in a real
// run) and asks the topology whether it can model each server-side one.
func (r *runner) prepareFaults() error {
	specs, faults, err := chaos.Build(r.sc.Faults)
	errs := []error{}
	if err != nil {
		errs = append(errs, fmt.Errorf("sim: faults: %w", err))
	}
	fe, direct := r.srv.(FaultEnv)
	for i, s := range specs {
		if IsClientSide(s) {
			continue // acts through Env.Load or Env.Disconnect
		}
		if err := r.srv.CanModel(s); err != nil {
			if !errors.Is(err, ErrNotModelled) {
				err = fmt.Errorf("%w: %w", ErrNotModelled, err)
			}
			errs = append(errs, fmt.Errorf("sim: fault %s (%s): %w", s.Name, s.Type, err))
			continue
		}
		if !direct {
			faults[i] = modelProof{Fault: &serverFault{srv: r.srv, spec: s}, spec: s}
		}
	}
	r.faultEnv = fe
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(specs) > 0 {
		r.faults = chaos.NewSequencer(specs, faults, simRuntime{r}, r.opts.VerifyTimeout, nil)
	}
	return nil
}

// stopFaults ends the timeline (faults held to the end are reverted) and says whether
// it failed: a fault not applied, proved or reverted makes the run invalid
// (ErrInfrastructure), except after an interruption — as the real runner.
func (r *runner) stopFaults() error {
	if r.faults == nil {
		return nil
	}
	r.faults.Stop()
	err := r.faults.Err()
	ev, failed := phases.FaultsFailed(err, r.interrupted != nil)
	if !failed {
		return nil
	}
	r.emit(ev)
	return fmt.Errorf("sim: faults: %w: %w", err, ErrInfrastructure)
}

// simRuntime is chaos.Runtime on the loop: the virtual clock, and calls made at once.
type simRuntime struct{ r *runner }

func (s simRuntime) Now() time.Time       { return s.r.loop.Now() }
func (s simRuntime) Stamp() time.Time     { return s.r.loop.Now() }
func (simRuntime) Cancel()                {}
func (s simRuntime) Emit(ev ledger.Event) { s.r.emit(ev) }

func (s simRuntime) At(t time.Time, fn func()) func() {
	tm := s.r.loop.At(t, fn)
	return func() { s.r.loop.Stop(tm) }
}

func (s simRuntime) Do(op chaos.Op, done func(error)) {
	done(op.Call(context.Background(), s.r.env()))
}

// serverFault is a server-side fault on a Server that is no FaultEnv (a test's fake):
// Server.Fault carries it out.
type serverFault struct {
	srv  Server
	spec scenarios.Fault
	stop func()
}

func (f *serverFault) Apply(context.Context, chaos.Env) (err error) {
	f.stop, err = f.srv.Fault(f.spec)
	return err
}

func (f *serverFault) Verify(context.Context, chaos.Env) error { return nil }

func (f *serverFault) Revert(context.Context, chaos.Env) error {
	if f.stop != nil {
		f.stop()
	}
	return nil
}

// modelProof is a fault carried out by a Server that is no FaultEnv (a test's fake):
// its proof is the fake's construction, there is nothing for chaos's Verify to read.
type modelProof struct {
	chaos.Fault
	spec scenarios.Fault
}

func (modelProof) Verify(context.Context, chaos.Env) error { return nil }

func (f modelProof) Evidence() string {
	return fmt.Sprintf("simulated: %s applied to %s", f.spec.Type, f.spec.Target)
}

// env is the chaos.Env the faults act through: the simulated client's, and the
// topology's processes and links (FaultEnv).
func (r *runner) env() chaos.Env {
	env := &chaos.FuncEnv{
		MembersFunc: r.sc.Topology().Members,
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
	workload.ClientFaults{Scenario: r.sc, Seq: func() int { r.burstSeq++; return r.burstSeq },
		SendMany: func(_ context.Context, c *workload.Common, n, conc, cancelAfter int) chaos.Run {
			return r.sendMany(c, n, conc, cancelAfter)
		},
		SetDisconnect: r.disconnect.Set}.Fill(env)
	if r.faultEnv != nil {
		r.faultEnv.FaultEnv(env)
	}
	return env
}

// sendMany sends n requests from c, conc at most in flight (0: all), counted in the
// returned Run's statistics; Stop cancels what is in flight and sends no more.
func (r *runner) sendMany(c *workload.Common, n, conc, cancelAfter int) chaos.Run {
	st := &chaos.LiveStats{}
	x := workload.NewExtras(c, n, conc, cancelAfter, r.loop.Now())
	var mine []*call
	stopped := false
	var fire func()
	fire = func() {
		if stopped {
			return
		}
		if req := x.Next(); req != nil {
			st.Sent.Add(1)
			req.Counted = st
			mine = append(mine, r.send(req, false, func(*client.Result) { fire() }))
		}
	}
	for range x.Window() {
		fire()
	}
	return chaos.FuncRun{StatsFunc: st.Snapshot, StopFunc: func() {
		stopped = true
		for _, c := range mine {
			c.cancelled()
		}
	}}
}
