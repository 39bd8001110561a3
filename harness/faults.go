package harness

import (
	"context"
	"fmt"
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

// chaosEnv builds the chaos.Env of a run.
func (r *runner) chaosEnv() chaos.Env {
	topo := r.sc.Topology()
	env := &chaos.FuncEnv{
		MembersFunc: topo.Members,
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
	workload.ClientFaults{Scenario: r.sc, Seq: func() int { return int(r.burstSeq.Add(1)) },
		SendMany: func(ctx context.Context, c *workload.Common, n, conc, cancelAfter int) chaos.Run {
			return chaos.GoRun(ctx, func(ctx context.Context, st *chaos.LiveStats) { r.sendMany(ctx, c, n, conc, cancelAfter, st) })
		},
		SetDisconnect: r.exec.SetDisconnect}.Fill(env)
	if sup, ok := r.tgt.(target.Supervisor); ok {
		env.ProcessFunc = sup.Process
		env.SignalFunc = sup.Signal
		env.RestartFunc = sup.Restart
		env.FailpointsFunc = sup.Failpoints
		env.LinkFunc = sup.Link
	}
	return env
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
		req.Counted = st // the executor counts its progress and outcome
		go func() {
			defer func() { <-sem; wg.Done() }()
			r.exec.SendCtx(ctx, req)
		}()
	}
	wg.Wait()
}
