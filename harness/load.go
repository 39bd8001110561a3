package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"pdsoak/harness/phases"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
)

// The load window's steps, in the order phases.Start takes them: openLoad, startFaults,
// startWorkloads, waitLoad.

// loadRun is the load phase in progress.
type loadRun struct {
	t0         time.Time
	done       chan struct{} // closed when every workload has returned
	faultDone  chan struct{} // closed when the fault runner has returned
	faultErr   error         // the fault runner's, set before faultDone closes
	faultCtx   context.Context
	stopFaults context.CancelFunc
}

// openLoad opens the load window at t0 (now) and writes its "load started" line; a run
// without faults has a fault runner that is already done.
func (r *runner) openLoad(ctx context.Context, ld *loadRun) {
	ld.t0, ld.done, ld.faultDone = time.Now(), make(chan struct{}), make(chan struct{})
	ld.faultCtx, ld.stopFaults = context.WithCancel(ctx)
	r.led.Emit(phases.LoadStartedEvent(ld.t0, len(r.workloads), r.sc.Duration.D()))
	if r.faults == nil {
		close(ld.faultDone)
	}
}

// startFaults runs the fault timeline from t0 until stopFaults.
func (r *runner) startFaults(ld *loadRun) {
	env := r.chaosEnv()
	go func() {
		defer close(ld.faultDone)
		defer func() {
			if p := recover(); p != nil {
				ld.faultErr = fmt.Errorf("harness: fault runner panicked: %v", p)
			}
		}()
		ld.faultErr = r.faults(ld.faultCtx, r.sc, env, ld.t0)
	}()
}

// startWorkloads starts every workload at t0; ld.done closes when all have returned.
func (r *runner) startWorkloads(ctx context.Context, ld *loadRun) {
	var sender workload.Sender = r.exec
	if sh := r.opts.Shard; sh.enabled() {
		sender = shardSender{s: r.exec, index: sh.Index}
	}
	var wl sync.WaitGroup
	for _, w := range r.workloads {
		wl.Go(func() {
			// Workloads keep to their own windows; ctx only carries Ctrl-C, so whether
			// a request at the end of a window is sent does not race the load timer.
			st := w.Run(ctx, ld.t0, sender)
			r.log.Info("workload finished", "workload", w.Name(), "requests", st.Requests)
			if o, ok := w.(*workload.OpenLoop); ok {
				if ctx.Err() != nil {
					st.Stopped = context.Cause(ctx)
				}
				if n := o.UnsentNote(st); n != "" {
					r.led.Emit(ledger.Event{Type: ledger.EventNote, Message: n})
				}
			}
		})
	}
	go func() { wl.Wait(); close(ld.done) }()
}

// waitLoad returns when the load window is over: at the scenario's duration, or
// earlier when the workloads are done and toEnd is false (phases.Start).
func (r *runner) waitLoad(ctx context.Context, ld *loadRun, toEnd bool) {
	loadCtx, cancelLoad := context.WithDeadline(ctx, ld.t0.Add(r.sc.Duration.D()))
	defer cancelLoad()
	if toEnd {
		<-loadCtx.Done()
		return
	}
	select {
	case <-ld.done:
	case <-loadCtx.Done():
	}
}
