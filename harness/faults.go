package harness

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pdsoak/chaos"
	"pdsoak/harness/target"
	"pdsoak/harness/workload"
	"pdsoak/scenarios"
)

// FaultRunner runs a scenario's fault timeline against env with step times measured
// from start (the start of load). It returns once nothing is applied any more; when ctx
// ends it reverts everything first. An error means a fault could not be applied,
// verified or reverted: the run is invalid (ErrInfrastructure).
type FaultRunner func(ctx context.Context, sc *scenarios.Scenario, env chaos.Env, start time.Time) error

// ChaosTimeline is the default FaultRunner: the chaos package's Timeline.
func ChaosTimeline(log *slog.Logger) FaultRunner {
	return func(ctx context.Context, sc *scenarios.Scenario, env chaos.Env, start time.Time) error {
		tl, err := chaos.NewTimeline(sc.Faults, chaos.WithLogger(log))
		if err != nil {
			return err
		}
		return tl.Run(ctx, env, start)
	}
}

// chaosEnv builds the chaos.Env of a run.
func (r *runner) chaosEnv() chaos.Env {
	topo := r.sc.Topology()
	env := &chaos.FuncEnv{
		MembersFunc: topo.Members,
		LoadFunc:    r.load,
		DisconnectFunc: func(ctx context.Context, target string, d chaos.Disconnect) (chaos.Run, error) {
			return r.disconnect(ctx, target, d), nil
		},
		ScrapeFunc: func(ctx context.Context, process string) (map[string]float64, error) {
			for _, s := range r.tgt.MetricsSources() {
				if s.Process == process {
					return r.scr.scrape(ctx, s.URL)
				}
			}
			return nil, fmt.Errorf("harness: no metrics endpoint for %q: %w", process, chaos.ErrUnsupported)
		},
		EmitFunc: r.led.Emit,
	}
	if sup, ok := r.tgt.(target.Supervisor); ok {
		env.ProcessFunc = sup.Process
		env.SignalFunc = sup.Signal
		env.RestartFunc = sup.Restart
		env.FailpointsFunc = sup.Failpoints
		env.LinkFunc = sup.Link
	}
	return env
}

// extra returns a request factory for n extra requests shaped like spec, with ids of
// their own ("<workload>-burst<k>-<seq>") so they never collide with the workload's.
func (r *runner) extra(spec scenarios.Workload, kind string) *workload.Common {
	return workload.Extra(r.sc, spec, chaos.ExtraPrefix(spec.Name, kind, int(r.burstSeq.Add(1))))
}

// load implements chaos.Env.Load: a burst of extra requests through the executor,
// recorded in the ledger like any other, counted live for the fault's verification.
func (r *runner) load(ctx context.Context, target string, b chaos.Burst) (chaos.Run, error) {
	c := r.extra(chaos.BurstWorkload(r.sc, target, b), "burst")
	return chaos.GoRun(ctx, func(ctx context.Context, st *chaos.LiveStats) {
		r.sendMany(ctx, c, b.Requests, b.Concurrency, 0, st)
	}), nil
}

// disconnect implements chaos.Env.Disconnect: either extra streams that cancel
// themselves after k tokens, or a rule applied to the workload's own streams.
func (r *runner) disconnect(ctx context.Context, target string, d chaos.Disconnect) chaos.Run {
	if d.Requests > 0 {
		c := r.extra(chaos.AbortWorkload(r.sc, target), "abort")
		return chaos.GoRun(ctx, func(ctx context.Context, st *chaos.LiveStats) {
			r.sendMany(ctx, c, d.Requests, 0, d.Tokens(), st)
		})
	}
	st := &chaos.LiveStats{}
	r.exec.SetDisconnect(target, d.Tokens(), d.Fraction, st)
	return chaos.FuncRun{
		StatsFunc: st.Snapshot,
		StopFunc:  func() { r.exec.SetDisconnect(target, 0, 0, nil) },
	}
}

// sendMany sends n requests from c with at most conc in flight (0: all), each
// cancelled when ctx ends, and counts them in st (workload.Extras: what goes out).
func (r *runner) sendMany(ctx context.Context, c *workload.Common, n, conc, cancelAfter int, st *chaos.LiveStats) {
	x := workload.NewExtras(c, n, conc, cancelAfter, time.Now())
	if x.Window() == 0 {
		return
	}
	sem := make(chan struct{}, x.Window())
	var wg sync.WaitGroup
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		req := x.Next()
		if req == nil {
			<-sem
			break
		}
		wg.Add(1)
		st.Sent.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			st.Count(r.exec.SendCtx(ctx, req).Outcome)
		}()
	}
	wg.Wait()
}
