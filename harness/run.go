package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/chaos"
	"pdsoak/harness/client"
	"pdsoak/harness/contention"
	"pdsoak/harness/gpu"
	"pdsoak/harness/judge"
	"pdsoak/harness/phases"
	"pdsoak/harness/target"
	"pdsoak/harness/workload"
	"pdsoak/internal/gcfloor"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/supervisor"
)

// ErrInfrastructure marks a run that could not be judged: the target could not be
// started or reached, a fault could not be applied, or the harness itself was the
// bottleneck. The CLI maps it to exit code 3.
var ErrInfrastructure = judge.ErrInfrastructure

// Defaults of the Options timings, applied by Run to fields left zero.
const (
	// DefaultSampleInterval is how often server gauges and GPUs are sampled into the ledger.
	DefaultSampleInterval = judge.DefaultSampleInterval
	// DefaultLeakPollInterval is how often gauges are scraped while waiting for them to drain.
	DefaultLeakPollInterval = judge.DefaultLeakPollInterval
	// DefaultScrapeTimeout bounds one metrics scrape.
	DefaultScrapeTimeout = 2 * time.Second
	// DefaultCancelDrain is how long in-flight requests may keep running after Ctrl-C.
	DefaultCancelDrain = judge.DefaultCancelDrain
	// DefaultResolveAfterCancel bounds the wait for cancelled requests to return.
	DefaultResolveAfterCancel = judge.DefaultResolveAfterCancel
	// DefaultSelfCheckTick is the period of the self-check ticker: the harness measures
	// how late each tick is delivered, which shows a starved scheduler (GC, CPU) even
	// when no request happens to be due.
	DefaultSelfCheckTick = 10 * time.Millisecond
	// DefaultDebugTimeout bounds one /debug/requests snapshot (all sources in parallel).
	DefaultDebugTimeout = 2 * time.Second
	// DefaultNVIDIADevices is the glob of NVIDIA device nodes: when it matches and NVML
	// cannot be used, the run says so in a note.
	DefaultNVIDIADevices = "/dev/nvidia*"
)

// Bounds of the run's own housekeeping.
const (
	// faultStopBound is how long the fault runner gets to revert everything once stopped.
	faultStopBound = 30 * time.Second
	// targetStopBound is how long the target gets to stop.
	targetStopBound = 30 * time.Second
	// targetInfoBound bounds the questions asked about the target (/v1/models, version).
	targetInfoBound = 3 * time.Second
	// wedgeTick is how often the wedge detector looks.
	wedgeTick = time.Second
)

// Options configure Run. Zero timings take the Default* constants.
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
	// Faults runs the fault timeline (nil: the chaos package's Timeline). Scenarios
	// without faults never call it.
	Faults FaultRunner
	// Notes are messages for the report's reader (e.g. a flag that cannot apply to the
	// chosen target); each becomes a note event right after run_start.
	Notes []string
	// CommandLine is recorded in the run's provenance (nil: os.Args). A caller that was
	// handed a secret on its command line passes a redacted copy.
	CommandLine []string

	// SampleInterval is how often server gauges and GPUs are sampled.
	SampleInterval time.Duration
	// LeakPollInterval is how often gauges are scraped while waiting for them to drain.
	LeakPollInterval time.Duration
	// ScrapeTimeout bounds one metrics scrape.
	ScrapeTimeout time.Duration
	// CancelDrain is how long in-flight requests may keep running after Ctrl-C.
	CancelDrain time.Duration
	// ResolveAfterCancel bounds the wait for cancelled requests to return.
	ResolveAfterCancel time.Duration
	// SelfCheckTick is the period of the self-check ticker.
	SelfCheckTick time.Duration
	// DebugTimeout bounds one /debug/requests snapshot.
	DebugTimeout time.Duration
	// NVIDIADevices is the glob of NVIDIA device nodes (DefaultNVIDIADevices).
	NVIDIADevices string
	// LivenessInterval is the period of the health probes (DefaultProbeInterval): one
	// GET of each health endpoint feeds liveness and the entry's health events.
	LivenessInterval time.Duration
	// Hurry, when set, ends when the user interrupts a second time: the runner then
	// skips (or cuts short) the forensics bundle it writes on an interrupt.
	Hurry context.Context

	// Shard makes this run one shard of a sharded run (zero: the whole scenario).
	Shard Shard

	// GCFloor is the smallest heap goal the run keeps in this process, in bytes (0:
	// gcfloor.DefaultFloor; negative: none), so that a burst on a small heap does not
	// run through GC cycles every few MB (internal/gcfloor).
	GCFloor int64

	// Procs, when positive, is the GOMAXPROCS the run sets in this process while it
	// runs (0: the runtime's, GOMAXPROCS in the environment as usual). One P cut the
	// send lag tail with many streams held (setProcs).
	Procs int
}

// Shard is one part of a sharded run: shard Index (1-based) of Count runs its
// deterministic, disjoint part of every workload (see workload.Shard), tags its request
// ids with its index, and applies faults only when it is shard 1. When Start is set the
// run waits for it and records how late it actually started (the clock skew between
// shards) in run_start.
type Shard struct {
	Index, Count int
	Start        time.Time
}

func (s Shard) enabled() bool { return s.Count > 0 }

// withDefaults fills the zero fields with their defaults.
func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.SampleInterval, DefaultSampleInterval)
	def(&o.LeakPollInterval, DefaultLeakPollInterval)
	def(&o.ScrapeTimeout, DefaultScrapeTimeout)
	def(&o.CancelDrain, DefaultCancelDrain)
	def(&o.ResolveAfterCancel, DefaultResolveAfterCancel)
	def(&o.SelfCheckTick, DefaultSelfCheckTick)
	def(&o.DebugTimeout, DefaultDebugTimeout)
	if o.NVIDIADevices == "" {
		o.NVIDIADevices = DefaultNVIDIADevices
	}
	if o.CommandLine == nil {
		o.CommandLine = os.Args
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// runner holds one run's state. Its fields are set phase by phase, in the order of run.
type runner struct {
	sc       *scenarios.Scenario
	opts     Options
	log      *slog.Logger
	led      *ledger.Writer
	hc       *http.Client // auxiliary GETs: metrics, debug, target info
	scr      scraper
	gpu      *gpu.Sampler // opened before run_start (its names are provenance)
	gpuErr   error
	burstSeq atomic.Int64

	// prepare
	workloads []workload.Workload
	noLag     map[string]bool // workloads throttled on purpose (max_in_flight)
	faults    FaultRunner     // nil: the scenario has no faults

	// startTarget, startExecutor
	tgt  target.Target
	exec *executor
	lag  *judge.LagRecorder

	// lastGPU is the latest GPU sample (nil: none yet), for the wedge detector.
	lastGPU *atomic.Pointer[[]ledger.GPU]
	// flog follows the fault events, for each request's cause.
	flog *faultLog
}

// Run executes a scenario: it starts (or reaches) the target, drives the workloads,
// runs the fault timeline, drains, checks for leaks and its own timing, and writes
// every event to OutDir/events.jsonl. It returns nil when the run happened, whatever
// the verdict (the reports package judges the ledger); an error wrapping
// ErrInfrastructure when the run could not be judged; another error for bad options.
// Cancelling ctx stops load, drains briefly, records the rest as cancelled, stops
// the embedded server and still writes the ledger; run_end then says why in
// Interrupted.
func Run(ctx context.Context, sc *scenarios.Scenario, opts Options) (err error) {
	if sc == nil {
		return errors.New("harness: nil scenario")
	}
	if opts.OutDir == "" {
		return errors.New("harness: Options.OutDir is required")
	}
	if sh := opts.Shard; sh.enabled() && (sh.Index < 1 || sh.Index > sh.Count) {
		return fmt.Errorf("harness: shard %d/%d: want 1 <= i <= n", sh.Index, sh.Count)
	}
	sc.ApplyDefaults()
	if len(sc.Workloads) == 0 {
		return errors.New("harness: scenario has no workloads")
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return fmt.Errorf("harness: out dir: %w", err)
	}
	opts = opts.withDefaults()
	defer setProcs(opts.Procs)()
	if opts.GCFloor >= 0 {
		defer gcfloor.New(gcfloor.WithFloor(uint64(cmp.Or(opts.GCFloor, gcfloor.DefaultFloor)))).Start()()
	}
	// The wedge detector judges GPU idleness from the GPU sampler's latest reading
	// rather than reading NVML itself (a second reader would make the sampler's busy).
	lastGPU := new(atomic.Pointer[[]ledger.GPU])
	flog := &faultLog{margin: reports.DefaultCauseMargin}
	onEvent := func(ev ledger.Event) {
		flog.add(ev) // before anyone sees it: a request ending now may blame it
		if ev.Type == ledger.EventSample && ev.Source == ledger.GPUSource {
			lastGPU.Store(&ev.GPUs)
		}
		if opts.OnEvent != nil {
			opts.OnEvent(ev)
		}
	}
	led, err := ledger.Create(filepath.Join(opts.OutDir, "events.jsonl"), onEvent)
	if err != nil {
		return err
	}
	// A ledger that can no longer be written (a full disk) ends the run as an interrupt
	// does, with its error as the cause: every later event is lost, and hours of load
	// nobody can judge are worse than an invalid run that says why at once.
	ctx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	go func() {
		select {
		case <-led.Failed():
			cancelRun(led.Err())
		case <-ctx.Done():
		}
	}()
	hc := &http.Client{Transport: auxTransport(sc)} // clientopts.go
	r := &runner{sc: sc, opts: opts, log: opts.Logger, led: led, hc: hc,
		scr: scraper{hc: hc, timeout: opts.ScrapeTimeout}, lastGPU: lastGPU, flog: flog}
	defer func() {
		var interrupted error
		if ctx.Err() != nil {
			interrupted = context.Cause(ctx)
		}
		led.Emit(phases.RunEndEvent(err, interrupted))
		if cerr := led.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	defer hc.CloseIdleConnections()
	if !opts.Shard.Start.IsZero() && !sleepUntil(ctx, opts.Shard.Start) {
		return fmt.Errorf("harness: interrupted while waiting for the shared start %s", opts.Shard.Start.Format(time.RFC3339Nano))
	}
	r.gpu, r.gpuErr = gpu.Open()
	defer r.closeGPU() // after run: the GPU sampler has stopped by then
	return r.run(ctx)
}

// run is the main loop, one phase per step; each phase writes its own ledger events.
func (r *runner) run(ctx context.Context) (err error) {
	r.announce() // run_start, notes, GPU telemetry
	if err := r.prepare(); err != nil {
		return err
	}
	tgt, err := r.startTarget(ctx)
	if err != nil {
		return err
	}
	r.tgt = tgt
	defer func() {
		// A launched process left behind by the teardown, or one SIGKILL could not get
		// reaped (the embedded topology's), makes the run invalid.
		if serr := r.stopTarget(ctx); errors.Is(serr, target.ErrLeftBehind) || errors.Is(serr, supervisor.ErrNotReaped) {
			err = errors.Join(err, fmt.Errorf("harness: teardown: %w: %w", serr, ErrInfrastructure))
		}
	}()
	r.describeTarget(ctx) // the target event

	copts, err := clientOptions(r.sc) // clientopts.go
	if err != nil {
		return fmt.Errorf("%v: %w", err, ErrInfrastructure)
	}
	c, err := client.New(tgt.URL(), copts...)
	if err != nil {
		return fmt.Errorf("harness: %v: %w", err, ErrInfrastructure)
	}
	defer c.CloseIdleConnections()
	// Requests outlive the load window and Ctrl-C: the drain decides when they end.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	r.startExecutor(reqCtx, c)
	fb := r.newBundles()
	defer fb.wait() // before stopTarget: bundles read the live processes
	r.exec.onSilentDrop = fb.silentDrop

	// The order of a run's start, one description the simulator follows too. Every stop
	// is deferred as well (each is idempotent), should a step panic.
	var stopSamplers, stopPD, stopWedge func()
	var probes *probes
	defer func() {
		if probes != nil {
			probes.stop()
		}
		for _, f := range []func(){stopWedge, stopPD, stopSamplers} {
			if f != nil {
				f()
			}
		}
	}()
	ld := &loadRun{}
	var startFaults func()
	if r.faults != nil {
		startFaults = func() { r.startFaults(ld) }
	}
	phases.Start{
		Samplers:  func() { stopSamplers = r.startSamplers(ctx) },
		PD:        func() { stopPD = r.startPDWatch(ctx) }, // pdwatch.go: prefill counters, until after the drain
		Watches:   func() { stopWedge = r.startWedgeWatch(ctx, fb) },
		Probes:    func() { probes = r.startProbes(ctx) }, // probe.go: liveness, and the entry's health until after the drain
		Open:      func() { r.openLoad(ctx, ld) },
		Faults:    startFaults,
		Workloads: func() { r.startWorkloads(ctx, ld) },
		Window:    func(toEnd bool) { r.waitLoad(ctx, ld, toEnd) },
	}.Run()
	r.interrupted(ctx, fb) // after Ctrl-C: what is in flight and overdue

	// The order of a run's end, one description the simulator follows too.
	faultErr, selfErr := phases.End{
		Drain:        func() { r.drain(ctx, ld, cancelReqs) },
		StopPD:       stopPD,
		StopHealth:   probes.stopHealth,
		StopWatches:  stopWedge, // the wedge detector
		StopFaults:   func() error { return r.stopFaults(ctx, ld) },
		StopProbes:   probes.stop,
		StopSamplers: stopSamplers,
		CheckLeaks:   func() { r.checkLeaks(ctx) },
		SelfCheck:    r.selfCheck,
	}.Run()
	if ctx.Err() != nil {
		r.led.Emit(phases.InterruptedEvent(context.Cause(ctx)))
	} else if why := r.failures(faultErr, selfErr); len(why) > 0 && fb.enabled() {
		fb.write(ctx, "end", strings.Join(why, "; ")) // forensics/end
	}
	return errors.Join(faultErr, selfErr)
}

// startWedgeWatch runs the wedge detector until the returned func is called (idempotent).
func (r *runner) startWedgeWatch(ctx context.Context, fb *bundles) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.watchWedge(wctx, fb, wedgeTick) })
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}

// announce writes run_start (with the run's provenance), one note per Options.Notes,
// and the GPU telemetry line (plus a note when NVIDIA devices exist but NVML cannot
// be used).
func (r *runner) announce() {
	sc := r.sc
	start := ledger.Event{Type: ledger.EventRunStart, Scenario: sc.Name, Seed: sc.Seed, URL: sc.Target.URL,
		Provenance: provenance(r.opts.CommandLine, r.gpu)}
	if sc.Embedded() {
		start.Message = "embedded reference server"
	}
	if sh := r.opts.Shard; sh.enabled() {
		start.Time = time.Now()
		start.Shard = &ledger.Shard{Index: sh.Index, Count: sh.Count}
		if !sh.Start.IsZero() {
			at := sh.Start.UTC()
			start.Shard.SharedStart = &at
			start.Shard.Skew = start.Time.Sub(sh.Start).Seconds()
		}
	}
	r.led.Emit(start)
	for _, n := range r.opts.Notes {
		r.led.Emit(ledger.Event{Type: ledger.EventNote, Message: n})
	}
	if sh := r.opts.Shard; sh.Index > 1 && len(sc.Faults) > 0 {
		r.led.Emit(ledger.Event{Type: ledger.EventNote, Message: fmt.Sprintf("shard %d/%d applies no faults: shard 1 applies them for the whole run", sh.Index, sh.Count)})
	}
	r.announceGPU()
}

// prepare builds every workload and the fault timeline before anything starts: a bad
// workload or fault spec is the scenario's problem (chaos.ErrBadSpec, exit 2), not the
// infrastructure's.
func (r *runner) prepare() error {
	sc := r.sc
	r.noLag = map[string]bool{}
	for i := range sc.Workloads {
		w, err := workload.New(sc, i, workload.WithShard(workload.Shard{Index: r.opts.Shard.Index, Count: r.opts.Shard.Count}))
		if err != nil {
			return fmt.Errorf("harness: %w", err)
		}
		r.workloads = append(r.workloads, w)
		if sc.Workloads[i].MaxInFlight > 0 {
			r.noLag[w.Name()] = true
		}
	}
	if len(sc.Faults) == 0 || r.opts.Shard.Index > 1 {
		return nil // only shard 1 applies faults, so the merged ledger has each once
	}
	r.faults = r.opts.Faults
	if r.faults == nil {
		tl, err := chaos.NewTimeline(sc.Faults, chaos.WithLogger(r.log))
		if err != nil {
			return fmt.Errorf("harness: faults: %w", err)
		}
		r.faults = func(ctx context.Context, _ *scenarios.Scenario, env chaos.Env, start time.Time) error {
			return tl.Run(ctx, env, start)
		}
	}
	return nil
}

// startTarget starts (or reaches) the target: the processes of target.launch, the
// embedded reference server, or an external target.url.
func (r *runner) startTarget(ctx context.Context) (target.Target, error) {
	sc := r.sc
	switch {
	case len(sc.Target.Launch) > 0:
		tgt, err := startLaunched(ctx, sc, r.opts, r.log, r.hc)
		if err != nil {
			return nil, err
		}
		return tgt, nil
	case sc.Embedded():
		tgt, err := startEmbedded(ctx, sc, r.opts, r.log)
		if err != nil {
			return nil, fmt.Errorf("harness: start the reference server: %v: %w", err, ErrInfrastructure)
		}
		r.led.Emit(ledger.Event{Type: ledger.EventLog, URL: tgt.URL(), Message: "reference server up at " + tgt.URL()})
		return tgt, nil
	default:
		tgt, err := openExternal(ctx, sc, r.hc)
		if err != nil {
			return nil, err
		}
		return tgt, nil
	}
}

// stopTarget stops whatever startTarget started, bounded, even after Ctrl-C.
func (r *runner) stopTarget(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), targetStopBound)
	defer cancel()
	err := r.tgt.Stop(sctx)
	if err != nil {
		r.log.Warn("stop target", "err", err)
		r.led.Emit(ledger.Event{Type: ledger.EventLog, Message: "stop target: " + err.Error()})
	}
	return err
}

// startExecutor wires the workloads' Sender: the client, the ledger, the debug probe
// consulted on silent drops, and the lag recorder of the self-check.
func (r *runner) startExecutor(reqCtx context.Context, c *client.Client) {
	r.lag = judge.NewLagRecorder(r.opts.SelfCheckTick)
	r.exec = &executor{c: c, led: r.led, log: r.log,
		probe: newDebugProbe(r.hc, r.tgt.DebugSources(), r.opts.DebugTimeout, r.log),
		lag:   r.lag, reqCtx: reqCtx, noLag: r.noLag, seed: r.sc.Seed, faults: r.flog, causeless: r.opts.Shard.Index > 1}
}

// startSamplers starts, for the whole load phase, the metrics sampler, the GPU sampler
// and the self-check ticker. The returned func stops them all and waits (idempotent).
func (r *runner) startSamplers(ctx context.Context) (stop func()) {
	auxCtx, stopAux := context.WithCancel(ctx)
	var aux sync.WaitGroup
	stopSampler := startSampler(auxCtx, r.scr, r.tgt.MetricsSources(), r.led, r.log, r.opts.SampleInterval)
	// The machine's own contention, so compare can tell a busy runner from a slow server.
	aux.Go(func() { contention.New(r.led.Emit, contention.WithInterval(r.opts.SampleInterval)).Run(auxCtx) })
	if r.gpu.Available() {
		inflight := func() int { return int(r.exec.inflight.Load()) }
		aux.Go(func() { gpuSampler(auxCtx, r.gpu, r.led, r.log, inflight, r.opts.SampleInterval) })
	}
	r.lag.Start()
	return sync.OnceFunc(func() { stopAux(); stopSampler(); aux.Wait(); r.lag.Stop() })
}

// drain lets in-flight requests run to their own deadlines within the drain bound (a
// brief one after Ctrl-C), then cancels whatever is left and waits, bounded, for it.
func (r *runner) drain(ctx context.Context, ld *loadRun, cancelReqs context.CancelFunc) {
	r.led.Emit(phases.Drain(phases.Wall(ctx), r.sc.Drain.Timeout.D(), r.opts.CancelDrain, r.opts.ResolveAfterCancel, ctx.Err() != nil,
		func(d time.Duration) bool { return waitFor(ld.done, d) }, func() int { return int(r.exec.inflight.Load()) }, cancelReqs))
}

// stopFaults makes the fault runner revert everything and waits (bounded) for it. A
// fault that could not be applied, verified or reverted makes the run invalid
// (ErrInfrastructure) — except after Ctrl-C, which cuts fault steps short.
func (r *runner) stopFaults(ctx context.Context, ld *loadRun) error {
	ld.stopFaults()
	var err error
	if waitFor(ld.faultDone, faultStopBound) {
		err = ld.faultErr
	} else {
		err = fmt.Errorf("harness: fault runner did not return within %v of being stopped", faultStopBound)
	}
	ev, failed := phases.FaultsFailed(err, ctx.Err() != nil)
	if !failed {
		return nil
	}
	r.led.Emit(ev)
	return fmt.Errorf("harness: faults: %w: %w", err, ErrInfrastructure)
}

// checkLeaks writes leak_check: whether the target's running/queued gauges returned to
// 0. A check that could not be evaluated (Ctrl-C, no metrics endpoint, an endpoint that
// never answered) has no Passed: it is neither a pass nor a fail.
func (r *runner) checkLeaks(ctx context.Context) {
	r.led.Emit(leakCheck(ctx, r.scr, r.tgt.MetricsSources(), r.sc.Drain.LeakTimeout.D(), r.opts.LeakPollInterval))
}

// selfCheck writes self_check: was the harness on time? A late harness makes the run
// invalid (ErrInfrastructure).
func (r *runner) selfCheck() error {
	scr := r.lag.Result(r.sc.SelfCheck.MaxLag.D())
	r.led.Emit(scr.Event())
	if !scr.Passed {
		return fmt.Errorf("harness: self-check: %s: %w", scr.Detail(), ErrInfrastructure)
	}
	return nil
}

// shardSender tags every request id with the shard, so shard ledgers never collide and
// ledger.UnshardID gives back the unsharded run's id.
type shardSender struct {
	s     workload.Sender
	index int
}

func (s shardSender) Send(ctx context.Context, r *workload.Req) *client.Result {
	r.ID = ledger.ShardID(r.ID, s.index)
	return s.s.Send(ctx, r)
}
