package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/chaos"
	"pdsoak/harness/client"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// ErrInfrastructure marks a run that could not be judged: the target could not be
// started or reached, a fault could not be applied, or the harness itself was the
// bottleneck. The CLI maps it to exit code 3.
var ErrInfrastructure = errors.New("harness: infrastructure failure")

// Options configure Run.
type Options struct {
	// OutDir receives events.jsonl and, for the embedded server, its process logs.
	OutDir string
	// Logger receives structured logs keyed by request id (nil: discarded).
	Logger *slog.Logger
	// OnEvent sees every ledger event as it is written (for a live status line). It is
	// called from many goroutines and must be cheap.
	OnEvent func(ledger.Event)
	// PDServerCommand is argv that runs the reference server binary's root command,
	// e.g. [os.Executable(), "pdserver"]; the launcher appends the role and flags.
	PDServerCommand []string
	// Faults runs the fault timeline (nil: ChaosTimeline, the chaos package's
	// Timeline). Scenarios without faults never call it.
	Faults FaultRunner
	// Notes are messages for the report's reader (from the CLI); each becomes a note
	// event right after run_start.
	Notes []string
}

// runner holds one run's state.
type runner struct {
	sc       *scenarios.Scenario
	opts     Options
	log      *slog.Logger
	led      *ledger.Writer
	tgt      Target
	exec     *executor
	hc       *http.Client // auxiliary GETs: metrics, debug
	burstSeq atomic.Int64
}

// Run executes a scenario: it starts (or reaches) the target, drives the workloads,
// runs the fault timeline, drains, checks for leaks and its own timing, and writes
// every event to OutDir/events.jsonl. It returns nil when the run happened, whatever
// the verdict (the reports package judges the ledger); an error wrapping
// ErrInfrastructure when the run could not be judged; another error for bad options.
// Cancelling ctx stops load, drains briefly, records the rest as cancelled, stops
// the embedded server and still writes the ledger.
func Run(ctx context.Context, sc *scenarios.Scenario, opts Options) (err error) {
	if sc == nil {
		return errors.New("harness: nil scenario")
	}
	if opts.OutDir == "" {
		return errors.New("harness: Options.OutDir is required")
	}
	sc.ApplyDefaults()
	if len(sc.Workloads) == 0 {
		return errors.New("harness: scenario has no workloads")
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return fmt.Errorf("harness: out dir: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	led, err := ledger.Create(filepath.Join(opts.OutDir, "events.jsonl"), opts.OnEvent)
	if err != nil {
		return err
	}
	r := &runner{sc: sc, opts: opts, log: log, led: led,
		hc: &http.Client{Transport: client.NewTransport(sc.Deadlines.Connect.D())}}
	defer func() {
		end := ledger.Event{Type: ledger.EventRunEnd}
		if err != nil {
			end.Error = err.Error()
		}
		led.Emit(end)
		if cerr := led.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	defer r.hc.CloseIdleConnections()
	return r.run(ctx)
}

func (r *runner) run(ctx context.Context) error {
	sc := r.sc
	start := ledger.Event{Type: ledger.EventRunStart, Scenario: sc.Name, Seed: sc.Seed, URL: sc.Target.URL}
	if sc.Embedded() {
		start.Message = "embedded reference server"
	}
	r.led.Emit(start)
	for _, n := range r.opts.Notes {
		r.led.Emit(ledger.Event{Type: ledger.EventNote, Message: n})
	}

	// Build every workload first: a bad workload fails before anything starts.
	var ws []workload.Workload
	noLag := map[string]bool{}
	for i := range sc.Workloads {
		w, err := workload.New(sc, i)
		if err != nil {
			return fmt.Errorf("harness: %w", err)
		}
		ws = append(ws, w)
		if sc.Workloads[i].MaxInFlight > 0 {
			noLag[w.Name()] = true
		}
	}
	faults := r.opts.Faults
	if faults == nil && len(sc.Faults) > 0 {
		// Build the timeline before anything starts: a bad fault spec is the
		// scenario's problem (chaos.ErrBadSpec, exit 2), not the infrastructure's.
		tl, err := chaos.NewTimeline(sc.Faults, chaos.WithLogger(r.log))
		if err != nil {
			return fmt.Errorf("harness: faults: %w", err)
		}
		faults = func(ctx context.Context, _ *scenarios.Scenario, env chaos.Env, start time.Time) error {
			return tl.Run(ctx, env, start)
		}
	}

	// The target.
	var tgt Target
	var err error
	switch {
	case len(sc.Target.Launch) > 0:
		tgt, err = startLaunched(ctx, sc, r.opts, r.log, r.hc)
		if err != nil {
			return err
		}
	case sc.Embedded():
		tgt, err = startEmbedded(ctx, sc, r.opts, r.log)
		if err != nil {
			return fmt.Errorf("harness: start the reference server: %v: %w", err, ErrInfrastructure)
		}
		r.led.Emit(ledger.Event{Type: ledger.EventLog, URL: tgt.URL(), Message: "reference server up at " + tgt.URL()})
	default:
		tgt, err = openExternal(ctx, sc, r.hc)
		if err != nil {
			return err
		}
	}
	r.tgt = tgt
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := tgt.Stop(sctx); err != nil {
			r.log.Warn("stop target", "err", err)
			r.led.Emit(ledger.Event{Type: ledger.EventLog, Message: "stop target: " + err.Error()})
		}
	}()

	c, err := client.New(tgt.URL(), client.WithTransport(client.NewTransport(sc.Deadlines.Connect.D())))
	if err != nil {
		return fmt.Errorf("harness: %v: %w", err, ErrInfrastructure)
	}
	defer c.CloseIdleConnections()
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	lag := newLagRecorder()
	r.exec = &executor{c: c, led: r.led, log: r.log, probe: newDebugProbe(r.hc, tgt.DebugSources()),
		lag: lag, reqCtx: reqCtx, noLag: noLag}

	// Samples and the self-check ticker run for the whole load phase.
	auxCtx, stopAux := context.WithCancel(ctx)
	var aux sync.WaitGroup
	aux.Add(1)
	go func() { defer aux.Done(); sampler(auxCtx, r.hc, tgt.MetricsSources(), r.led, SampleInterval) }()
	defer r.startGPU(auxCtx, &aux)() // a ledger line on GPU telemetry, then GPU samples; NVML shut down after aux
	lag.Start()
	stopAuxOnce := sync.OnceFunc(func() { stopAux(); aux.Wait(); lag.Stop() })
	defer stopAuxOnce()

	// Load.
	t0 := time.Now()
	loadCtx, cancelLoad := context.WithDeadline(ctx, t0.Add(sc.Duration.D()))
	defer cancelLoad()
	r.led.Emit(ledger.Event{Time: t0, Type: ledger.EventLog, Message: fmt.Sprintf("load started: %d workloads for %v", len(ws), sc.Duration)})

	var faultErr error
	faultDone := make(chan struct{})
	faultCtx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	if len(sc.Faults) > 0 {
		env := r.chaosEnv()
		go func() {
			defer close(faultDone)
			defer func() {
				if p := recover(); p != nil {
					faultErr = fmt.Errorf("harness: fault runner panicked: %v", p)
				}
			}()
			faultErr = faults(faultCtx, sc, env, t0)
		}()
	} else {
		close(faultDone)
	}

	var wl sync.WaitGroup
	for _, w := range ws {
		wl.Add(1)
		go func() {
			defer wl.Done()
			// Workloads keep to their own windows; ctx only carries Ctrl-C, so whether
			// a request at the end of a window is sent does not race the load timer.
			st := w.Run(ctx, t0, r.exec)
			r.log.Info("workload finished", "workload", w.Name(), "requests", st.Requests)
		}()
	}
	loadDone := make(chan struct{})
	go func() { wl.Wait(); close(loadDone) }()

	if len(sc.Faults) > 0 {
		<-loadCtx.Done() // the fault timeline plays out over the whole duration
	} else {
		select {
		case <-loadDone:
		case <-loadCtx.Done():
		}
	}
	cancelLoad() // the load window is over; workloads stop at their own windows

	// Drain: in-flight requests run to their own deadlines, within the drain bound
	// (a brief one after Ctrl-C); then whatever is left is cancelled.
	drainBound := sc.Drain.Timeout.D()
	if ctx.Err() != nil {
		drainBound = CancelDrain
	}
	drainStart := time.Now()
	drained := waitFor(loadDone, drainBound)
	left := r.exec.inflight.Load()
	if !drained {
		cancelReqs()
		waitFor(loadDone, ResolveAfterCancel)
	}
	detail := fmt.Sprintf("all requests resolved %v after load stopped", time.Since(drainStart).Round(time.Millisecond))
	if !drained {
		detail = fmt.Sprintf("%d requests still in flight after %v; cancelled", left, drainBound)
	}
	if ctx.Err() != nil {
		detail = "interrupted: " + detail
	}
	r.led.Emit(ledger.Event{Type: ledger.EventDrain, InFlight: int(left), Passed: ledger.Bool(drained), Detail: detail})

	// Faults: revert everything and wait (bounded) for the runner to finish.
	stopFaults()
	if !waitFor(faultDone, 30*time.Second) {
		faultErr = errors.Join(faultErr, errors.New("harness: fault runner did not return within 30s of being stopped"))
	}
	stopAuxOnce()

	var errs []error
	if faultErr != nil && ctx.Err() == nil {
		r.led.Emit(ledger.Event{Type: ledger.EventLog, Message: "fault timeline failed: " + faultErr.Error()})
		errs = append(errs, fmt.Errorf("harness: faults: %w: %w", faultErr, ErrInfrastructure))
	}

	// Leak check (not after Ctrl-C: the user wants out).
	if ctx.Err() == nil {
		lr := leakCheck(ctx, r.hc, tgt.MetricsSources(), sc.Drain.LeakTimeout.D())
		ev := ledger.Event{Type: ledger.EventLeakCheck, Detail: lr.detail, Metrics: lr.residual}
		if !lr.skipped {
			ev.Passed = ledger.Bool(lr.passed)
		}
		r.led.Emit(ev)
	}

	// Self-check: was the harness on time?
	scr := lag.Result(sc.SelfCheck.MaxLag.D())
	r.led.Emit(ledger.Event{Type: ledger.EventSelfCheck, Passed: ledger.Bool(scr.Passed),
		LagP99: max(scr.SendP99, scr.TickP99).Seconds(), LagMax: max(scr.SendMax, scr.TickMax).Seconds(), Detail: scr.Detail()})
	if !scr.Passed {
		errs = append(errs, fmt.Errorf("harness: self-check: %s: %w", scr.Detail(), ErrInfrastructure))
	}
	if ctx.Err() != nil {
		r.led.Emit(ledger.Event{Type: ledger.EventLog, Message: "run interrupted: " + context.Cause(ctx).Error()})
	}
	return errors.Join(errs...)
}

// waitFor waits until ch is closed or d passes; it reports whether ch closed.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
