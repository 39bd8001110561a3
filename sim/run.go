package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"pdsoak/chaos"
	"pdsoak/harness/judge"
	"pdsoak/harness/phases"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/server/api"
	"pdsoak/version"
)

// ErrInfrastructure marks a simulated run that could not be judged (a fault the model
// could not apply or prove); it wraps judge.ErrInfrastructure, so the CLI exits 3.
var ErrInfrastructure = judge.ErrInfrastructure

// Options configure Run. Zero timings take the real runner's defaults.
type Options struct {
	// OutDir receives events.jsonl.
	OutDir string
	// Logger receives structured logs (nil: discarded).
	Logger *slog.Logger
	// OnEvent sees every ledger event as it is written (from the simulation goroutine).
	OnEvent func(ledger.Event)
	// Notes become note events right after run_start.
	Notes []string
	// NewServer builds the simulated target on the loop (nil: NewTopology).
	NewServer func(*Loop, *scenarios.Scenario) (Server, error)
	// SampleInterval is how often the Server's gauges are sampled
	// (judge.DefaultSampleInterval); LeakPollInterval how often the leak check reads
	// them (judge.DefaultLeakPollInterval); ResolveAfterCancel bounds the wait for
	// requests cancelled at the end of the drain (judge.DefaultResolveAfterCancel).
	SampleInterval, LeakPollInterval, ResolveAfterCancel time.Duration
	// VerifyTimeout bounds how long a fault may take to prove itself
	// (chaos.DefaultVerifyTimeout).
	VerifyTimeout time.Duration
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.SampleInterval, judge.DefaultSampleInterval)
	def(&o.LeakPollInterval, judge.DefaultLeakPollInterval)
	def(&o.ResolveAfterCancel, judge.DefaultResolveAfterCancel)
	def(&o.VerifyTimeout, chaos.DefaultVerifyTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.NewServer == nil {
		o.NewServer = NewTopology
	}
	return o
}

// Refuse says why sc cannot run under --sim (an error wrapping ErrNotModelled), or nil:
// a scenario with an external target (target.url, target.launch) has nothing to simulate.
func Refuse(sc *scenarios.Scenario) error {
	switch {
	case sc.Target.URL != "":
		return fmt.Errorf("%w: the target is the external %s (target.url or --target); --sim simulates the reference server only", ErrNotModelled, sc.Target.URL)
	case len(sc.Target.Launch) > 0:
		return fmt.Errorf("%w: the target is launched by target.launch; --sim simulates the reference server only", ErrNotModelled)
	}
	return nil
}

// Run simulates a scenario: the topology (Options.NewServer) and the scenario's
// workloads, faults, drain, leak check and self-check advance on one virtual clock in
// this goroutine, and every event goes to OutDir/events.jsonl in the vocabulary of a
// real run, with run_start's mode "sim" and times Epoch + virtual time. It returns nil
// when the run happened, whatever the verdict; an error wrapping ErrNotModelled when the
// scenario cannot be simulated (before anything is written); an error wrapping
// ErrInfrastructure when a fault could not be applied or proved. Cancelling ctx stops
// the simulation; run_end then says why in Interrupted.
func Run(ctx context.Context, sc *scenarios.Scenario, opts Options) (err error) {
	if sc == nil {
		return errors.New("sim: nil scenario")
	}
	if opts.OutDir == "" {
		return errors.New("sim: Options.OutDir is required")
	}
	sc.ApplyDefaults()
	if len(sc.Workloads) == 0 {
		return errors.New("sim: scenario has no workloads")
	}
	if err := Refuse(sc); err != nil {
		return err
	}
	opts = opts.withDefaults()
	r := &runner{sc: sc, opts: opts, log: opts.Logger, loop: NewLoop(Epoch)}
	srv, err := opts.NewServer(r.loop, sc)
	if err != nil {
		return fmt.Errorf("sim: topology: %w", err)
	}
	r.srv = srv
	if err := r.prepare(); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return fmt.Errorf("sim: out dir: %w", err)
	}
	led, err := ledger.Create(filepath.Join(opts.OutDir, ledger.EventsFile), opts.OnEvent)
	if err != nil {
		return err
	}
	r.led = led
	defer func() {
		r.emit(phases.RunEndEvent(err, r.interrupted))
		if cerr := led.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	return r.run(ctx)
}

// runner holds one simulated run's state.
type runner struct {
	sc   *scenarios.Scenario
	opts Options
	log  *slog.Logger
	loop *Loop
	srv  Server
	led  *ledger.Writer
	// faultsSeen follows the fault events emitted so far, so each done event gets its
	// cause by the real runner's rule (reports.Cause) as the request ends.
	faultsSeen reports.FaultTracker
	// live is the simulated health prober (liveness.go); nil when the server has none.
	live *liveness
	api  *api.Handler

	workloads []workload.Workload
	faults    *chaos.Sequencer // nil: no faults (run_faults.go)
	faultEnv  FaultEnv         // the topology's mechanisms, when it has them
	sources   []string         // processes whose gauges are sampled and leak-checked

	// The client side.
	inflightN  int
	calls      []*call // in flight, in send order (cancelled in this order)
	disconnect chaos.DisconnectRules
	burstSeq   int
	sends      int // requests sent by workloads not throttled on purpose (self_check)

	// Workloads still running (sessions, schedules, rounds): the load is over when 0.
	active int

	stopSampler func()
	stopPD      func(last bool) // pdpath.go

	t0          time.Time
	interrupted error
	ctx         context.Context
}

// emit writes ev at the virtual time.
func (r *runner) emit(ev ledger.Event) {
	if ev.Time.IsZero() {
		ev.Time = r.loop.Now()
	}
	r.faultsSeen.Add(ev)
	if ev.Type == ledger.EventDone && ev.Cause == "" {
		// As harness/exec.go: the cause over the faults seen by the time it ended.
		start := ev.Time
		if ev.Scheduled != nil {
			start = *ev.Scheduled
		}
		ev.Cause = reports.Cause(reports.CauseRequest{Outcome: ev.Outcome, Start: start, End: ev.Time},
			r.faultsSeen.Windows(), reports.DefaultCauseMargin)
	}
	r.led.Emit(ev)
}

// prepare builds the front end, the workloads and the faults, and asks the topology
// about every fault before anything runs: a run is refused up front, never halfway.
func (r *runner) prepare() error {
	sc := r.sc
	var fopts []api.Option
	if fe, ok := r.srv.(FrontEnd); ok {
		fopts = fe.APIOptions()
	} else {
		fopts = []api.Option{api.WithModelName(sc.Target.Model)}
	}
	// Requests that send no sampling seed get one from the scenario's seed, not from
	// crypto/rand as a real server would: the run must be reproducible.
	seeds := rand.New(rand.NewPCG(uint64(sc.Seed), 0x5eed))
	fopts = append(fopts, api.WithSeedSource(seeds.Uint64), api.WithLogger(slog.New(slog.DiscardHandler)))
	r.api = api.New(nil, fopts...)
	for i := range sc.Workloads {
		w, err := workload.New(sc, i)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		r.workloads = append(r.workloads, w)
	}
	if err := r.prepareFaults(); err != nil {
		return err
	}
	for _, p := range sc.Topology().Processes {
		if p.Role != "router" {
			r.sources = append(r.sources, p.Name)
		}
	}
	return nil
}

// FrontEnd is implemented by a topology whose HTTP front end (the router, or the
// colocated worker) is configured differently from the default (the scenario's model
// name, no context length, no request timeout): the simulated client's requests are
// parsed by an api.Handler built with these options, as the real front end parses them.
type FrontEnd interface {
	APIOptions() []api.Option
}

// run is the main sequence, one phase per step, as the real runner's.
func (r *runner) run(ctx context.Context) error {
	r.ctx = ctx
	r.announce()
	// The real runner's order of a run's start (the sim has no wedge watch).
	var startFaults func()
	if r.faults != nil {
		startFaults = func() { r.faults.Start(r.t0) }
	}
	phases.Start{
		Samplers:  r.startSampler,
		PD:        r.startPDCounters,
		Probes:    r.startLiveness,
		Open:      r.openLoad,
		Faults:    startFaults,
		Workloads: r.startWorkloads,
		Window: func(toEnd bool) {
			r.runWhile(r.t0.Add(r.sc.Duration.D()), func() bool { return toEnd || r.active > 0 })
		},
	}.Run()
	// The real runner's order of a run's end (the sim has no wedge watch).
	faultErr, _ := phases.End{
		Drain:        r.drain,
		StopPD:       func() { r.stopPD(r.interrupted == nil) },
		StopHealth:   r.stopHealth,
		StopFaults:   r.stopFaults,
		StopProbes:   r.stopLiveness, // last probes once the faults are reverted
		StopSamplers: r.stopSampler,
		CheckLeaks:   r.checkLeaks,
		SelfCheck:    func() error { r.selfCheck(); return nil },
	}.Run()
	if r.interrupted != nil {
		r.emit(phases.InterruptedEvent(r.interrupted))
	}
	return faultErr
}

// runWhile runs the loop until end while cond holds, checking ctx now and then; an
// interruption stops the run's phases (they then run only what must be recorded).
func (r *runner) runWhile(end time.Time, cond func() bool) {
	done := r.ctx.Done()
	r.loop.RunWhile(end, func() bool {
		if r.interrupted == nil {
			select {
			case <-done:
				r.interrupted = context.Cause(r.ctx)
				if r.faults != nil {
					r.faults.Stop() // as Ctrl-C ends the real timeline
				}
			default:
			}
		}
		return r.interrupted == nil && cond()
	})
}

// announce writes run_start (mode sim, with the run's provenance) and the notes.
func (r *runner) announce() {
	sc := r.sc
	r.emit(ledger.Event{Type: ledger.EventRunStart, Scenario: sc.Name, Seed: sc.Seed, Mode: ledger.ModeSim,
		Message:    "simulated reference server (virtual time)",
		Provenance: provenance()})
	for _, n := range r.opts.Notes {
		r.emit(ledger.Event{Type: ledger.EventNote, Message: n})
	}
	r.emit(ledger.Event{Type: ledger.EventLog, Message: "simulated " + scenarios.Plan(sc).Target})
}

// provenance is the build a simulated run was made with. Unlike a real run's it names
// no host, CPU or command line: a simulated ledger depends only on the scenario, its
// seed and the build, so that two runs of one seed are byte-identical wherever and
// however they were started (--out differs).
func provenance() *ledger.Provenance {
	v := version.Get()
	return &ledger.Provenance{HarnessVersion: v.Module, Revision: v.RevisionString(), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH}
}

// drain lets in-flight requests run to their own deadlines within the drain bound,
// then cancels whatever is left and waits, bounded, for it (phases.Drain).
func (r *runner) drain() {
	first := true
	wait := func(d time.Duration) bool {
		end := r.loop.Now().Add(d)
		if first { // the drain bound: an interrupt cuts it short
			first = false
			r.runWhile(end, func() bool { return r.active > 0 })
		} else {
			r.loop.RunWhile(end, func() bool { return r.active > 0 })
		}
		return r.active == 0
	}
	r.emit(phases.Drain(r.loop, r.sc.Drain.Timeout.D(), judge.DefaultCancelDrain, r.opts.ResolveAfterCancel,
		r.interrupted != nil, wait, func() int { return r.inflightN }, r.cancelAll))
}

// checkLeaks writes leak_check: the Server's running/queued gauges polled on the virtual
// clock until they read 0 or the leak timeout passes (phases.CheckLeaks).
func (r *runner) checkLeaks() {
	r.emit(phases.CheckLeaks(r.loop, r.interrupted != nil, r.sources, r.gauges, r.sc.Drain.LeakTimeout.D(), r.opts.LeakPollInterval))
}

// gauges reads every source's gauges (phases.ReadAll): a process that is down or
// paused does not answer.
func (r *runner) gauges(context.Context) ([]map[string]float64, []error) {
	g := r.srv.Gauges()
	vals, errs := make([]map[string]float64, len(r.sources)), make([]error, len(r.sources))
	for i, p := range r.sources {
		if vals[i] = g[p]; vals[i] == nil {
			errs[i] = fmt.Errorf("sim: %s is not answering", p)
		}
	}
	return vals, errs
}

// selfCheck writes self_check: on a virtual clock the harness is never late.
func (r *runner) selfCheck() {
	ev := judge.SelfCheck{Passed: true, SendSamples: r.sends, MaxLag: r.sc.SelfCheck.MaxLag.D()}.Event()
	ev.Detail += " (virtual time: a simulated harness has no lag)"
	r.emit(ev)
}

// startSampler samples the Server's gauges every SampleInterval from the start of load
// until stopSampler, like the real sampler (phases.Sample).
func (r *runner) startSampler() {
	r.stopSampler = phases.Sample(r.loop, r.opts.SampleInterval, r.sources, r.gauges, r.emit, nil)
}
