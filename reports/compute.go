package reports

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// Builder accumulates a ledger one event at a time (so a long soak's ledger need not fit
// in memory as events) and computes Results at the end.
type Builder struct {
	cfg       Config
	arrivals  arrivals
	start     time.Time
	end       time.Time
	scenario  string
	seed      int64
	seedSet   bool
	mode      string
	target    string
	runErr    string
	ended     bool // the ledger has its run_end
	interrupt string
	shard     *ledger.Shard // run_start's: a shard's ledger or a merged one
	retries   connRetries
	prov      *Provenance
	scheduled map[string]bool // request id -> resolved
	outcomes  map[ledger.Outcome]int
	workloads map[string]int
	drops     []SilentDrop
	dropCount int
	duplicate []string
	latencySamples
	lag        []float64
	samples    []sample // for recovery
	faults     []*faultState
	faultIdx   map[string]*faultState
	leak       *CheckResult
	merged     mergedLeaks // a merged ledger's per-shard leak checks and activity
	self       *CheckResult
	badIDs     map[ledger.Outcome][]string
	dropStages map[string]int
	notes      []string
	forensics  []ForensicsBundle
	gpu        *gpuStats
	tl         timelineAcc
	byWorkload map[string]*workloadStats
	probes     map[string][]probeAnswer // probe name -> ok answers, in ledger order
	pd         pdAcc                    // pd_path and truthful_health (pdpath.go, health.go)
	explain    explainAcc               // causes of non-ok outcomes, target liveness
	contention contentionAcc            // the machine's own contention (harness/contention)
	unknown    map[ledger.EventType]int // events of a type this harness does not know
}

// workloadStats is one workload's share of the ledger (results.json's by_workload).
type workloadStats struct {
	outcomes map[ledger.Outcome]int
	latencySamples
}

// latencySamples are the latencies of terminal requests, as compare resamples them.
type latencySamples struct {
	ttft, itl, e2e []float64
	itlEnds        []int // itl[itlEnds[i-1]:itlEnds[i]] are request i's gaps (requests with any)
	// ttftSess and e2eSess name each ttft and e2e sample's agent session ("" outside
	// one), so that compare resamples an agent's turns together.
	ttftSess, e2eSess []string
}

func (s *latencySamples) add(e ledger.Event) {
	sess := sessionKey(e)
	if e.TTFT > 0 {
		s.ttft = append(s.ttft, e.TTFT)
		s.ttftSess = append(s.ttftSess, sess)
	}
	if len(e.ITL) > 0 {
		s.itl = append(s.itl, e.ITL...)
		s.itlEnds = append(s.itlEnds, len(s.itl))
	}
	s.e2e = append(s.e2e, e.E2E)
	s.e2eSess = append(s.e2eSess, sess)
}

// probeAnswer is one successful answer to a probe prompt.
type probeAnswer struct {
	id, text string
}

type sample struct {
	at time.Time // scheduled time
	ok bool
}

type faultState struct {
	res   FaultResult
	start time.Time
	stop  time.Time
	// cut: its proof was still pending when the run stopped (ledger.ProofCutAtStop).
	cut bool
}

// NewBuilder returns an empty Builder.
func NewBuilder(cfg Config) *Builder {
	if cfg.MaxDrops == 0 {
		cfg.MaxDrops = DefaultMaxDrops
	}
	r := &cfg.Recovery
	if r.Window <= 0 {
		r.Window = DefaultRecoveryWindow
	}
	if r.Within <= 0 {
		r.Within = DefaultRecoveryWithin
	}
	if r.Threshold <= 0 {
		r.Threshold = DefaultRecoveryThreshold
	}
	if r.MinRequests <= 0 {
		r.MinRequests = DefaultRecoveryMinRequests
	}
	if cfg.CauseMargin <= 0 {
		cfg.CauseMargin = DefaultCauseMargin
	}
	return &Builder{
		cfg:        cfg,
		scenario:   cfg.Scenario,
		seed:       cfg.Seed,
		target:     cfg.Target,
		scheduled:  map[string]bool{},
		outcomes:   map[ledger.Outcome]int{},
		workloads:  map[string]int{},
		faultIdx:   map[string]*faultState{},
		badIDs:     map[ledger.Outcome][]string{},
		explain:    explainAcc{maxListed: cfg.MaxDrops},
		dropStages: map[string]int{},
		gpu:        newGPUStats(),
		byWorkload: map[string]*workloadStats{},
	}
}

// Compute judges a whole ledger held in memory.
func Compute(evs []ledger.Event, cfg Config) *Results {
	b := NewBuilder(cfg)
	for _, e := range evs {
		b.Add(e)
	}
	r := b.Results()
	r.timeline = b.Timeline(r)
	return r
}

// Add folds one event into the builder.
func (b *Builder) Add(e ledger.Event) {
	if !e.Time.IsZero() {
		if b.start.IsZero() || e.Time.Before(b.start) {
			b.start = e.Time
		}
		if e.Time.After(b.end) {
			b.end = e.Time
		}
	}
	b.explain.add(e)
	b.arrivals.add(e, b.cfg.ArrivalWorkloads)
	switch e.Type {
	case ledger.EventRunStart:
		b.start = e.Time
		if e.Scenario != "" {
			b.scenario = e.Scenario
		}
		b.seed, b.seedSet = e.Seed, true
		b.mode = e.Mode
		if e.Shard != nil {
			b.shard = e.Shard
		}
		if e.URL != "" {
			b.target = e.URL
		} else if e.Target != "" {
			b.target = e.Target
		}
		if e.Provenance != nil {
			p := b.provenance()
			p.Provenance = *e.Provenance
		}
	case ledger.EventRunEnd:
		b.ended = true
		if e.Error != "" {
			b.runErr = e.Error
		}
		if e.Interrupted != "" {
			b.interrupt = e.Interrupted
		}
	case ledger.EventNote:
		if e.Message != "" {
			b.notes = append(b.notes, e.Message)
		}
		if e.Source == "forensics" && e.Detail != "" {
			b.forensics = append(b.forensics, ForensicsBundle{Dir: filepath.ToSlash(e.Detail), Note: e.Message})
		}
	case ledger.EventTarget:
		p := b.provenance()
		if e.ServerVersion != "" {
			p.ServerVersion = e.ServerVersion
		}
		if len(e.Models) > 0 {
			p.Models = e.Models
		}
	case ledger.EventScheduled:
		if e.RequestID != "" {
			if _, seen := b.scheduled[e.RequestID]; !seen {
				b.scheduled[e.RequestID] = false
				b.gpu.scheduled(e)
				b.tl.scheduled(e)
			}
		}
	case ledger.EventSent:
		if e.Lag > 0 || e.Scheduled != nil {
			b.lag = append(b.lag, e.Lag)
			b.contention.sent(e)
		}
	case ledger.EventDone:
		if b.shard.Merged() {
			b.merged.active(ledger.ShardOf(e.RequestID), e.Time)
		}
		b.gpu.done(e)
		b.addDone(e)
		b.retries.add(e)
		if e.Probe != "" && e.Outcome == ledger.OutcomeOK {
			if b.probes == nil {
				b.probes = map[string][]probeAnswer{}
			}
			b.probes[e.Probe] = append(b.probes[e.Probe], probeAnswer{id: e.RequestID, text: e.Text})
		}
	case ledger.EventPDCounter, ledger.EventHealth:
		b.pd.add(e)
	case ledger.EventSample:
		if e.Source == ledger.ContentionSource {
			b.contention.add(e)
		}
		if e.Source == ledger.GPUSource || len(e.GPUs) > 0 {
			b.gpu.sample(e)
		}
		b.tl.sample(e)
	case ledger.EventFaultStart:
		f := b.fault(e.Fault)
		f.start = e.Time
		if e.FaultType != "" {
			f.res.Type = e.FaultType
		}
		if e.Target != "" {
			f.res.Target = e.Target
		}
	case ledger.EventFaultStop:
		f := b.fault(e.Fault)
		f.stop = e.Time
		if e.Error != "" {
			f.res.Detail = joinDetail(f.res.Detail, "revert: "+e.Error)
		}
	case ledger.EventFaultVerified:
		f := b.fault(e.Fault)
		ok := e.Passed != nil && *e.Passed
		if f.res.Verified == nil || !ok {
			f.res.Verified = ledger.Bool(ok)
		}
		if e.Detail != "" {
			f.res.Detail = joinDetail(f.res.Detail, e.Detail)
		}
		f.cut = f.cut || (!ok && e.Detail == ledger.ProofCutAtStop)
	case ledger.EventDrain:
		if b.shard.Merged() {
			b.merged.drained(e.Part, e.Time)
		}
	case ledger.EventLeakCheck:
		if b.shard.Merged() {
			b.merged.check(e)
			break // judged at the end, from every shard's check and activity
		}
		if b.leak != nil && b.leak.State != StatePass {
			break // a merged ledger has one per shard: a shard's failure is not overwritten
		}
		// Passed nil: the harness could not run the check (no metrics answer).
		b.leak = &CheckResult{State: StateNotEvaluated, Detail: e.Detail, Metrics: e.Metrics}
		if e.Passed != nil {
			b.leak.State, b.leak.Passed = newState(*e.Passed), *e.Passed
		} else if b.leak.Detail == "" {
			b.leak.Detail = "the harness could not run the leak check"
		}
	case ledger.EventSelfCheck:
		passed := e.Passed == nil || *e.Passed
		if b.self != nil && !b.self.Passed {
			break // one per shard in a merged ledger: a shard's failure sticks
		}
		b.self = &CheckResult{State: newState(passed), Passed: passed, Detail: e.Detail}
		if e.LagP99 > 0 || e.LagMax > 0 {
			b.self.Metrics = map[string]float64{"lag_p99": e.LagP99, "lag_max": e.LagMax}
		}
	case ledger.EventHeaders, ledger.EventFirstToken, ledger.EventLog, ledger.EventTargetDown, ledger.EventTargetUp:
		// Known; what reports needs of them is read above (explain) or from done.
	default:
		// A newer harness's event, or an edited ledger: said in the notes, not dropped.
		if b.unknown == nil {
			b.unknown = map[ledger.EventType]int{}
		}
		b.unknown[e.Type]++
	}
}

// cutShort: the ledger stops before run_end, which every run writes last, and the run
// is not judging itself before writing it.
func (b *Builder) cutShort() bool { return !b.ended && !b.cfg.InProgress }

// runErrors splits run_end's error (errors.Join puts one per line) into readable parts,
// leaving out what the ledger already says on its own: a failed self-check is its own
// reason, and "infrastructure failure" is the runner's marker for an invalid run.
func (b *Builder) runErrors() []string {
	var out []string
	for _, line := range strings.Split(b.runErr, "\n") {
		msg := strings.TrimSuffix(Readable(line), ": infrastructure failure")
		switch {
		case msg == "", msg == "infrastructure failure":
		case b.self != nil && !b.self.Passed && strings.HasPrefix(msg, "self-check"):
		default:
			out = append(out, msg)
		}
	}
	return out
}

func (b *Builder) provenance() *Provenance {
	if b.prov == nil {
		b.prov = &Provenance{}
	}
	return b.prov
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func (b *Builder) fault(name string) *faultState {
	if f, ok := b.faultIdx[name]; ok {
		return f
	}
	f := &faultState{res: FaultResult{Name: name}}
	b.faultIdx[name] = f
	b.faults = append(b.faults, f)
	return f
}

func (b *Builder) addDone(e ledger.Event) {
	if e.RequestID != "" {
		if b.scheduled[e.RequestID] {
			b.duplicate = append(b.duplicate, e.RequestID)
			return
		}
		b.scheduled[e.RequestID] = true
	}
	o := e.Outcome
	if !o.Valid() {
		b.notes = append(b.notes, fmt.Sprintf("request %s has unknown outcome %q; counted as invalid", e.RequestID, o))
		o = ledger.OutcomeInvalid
	}
	b.outcomes[o]++
	if e.Workload != "" {
		b.workloads[e.Workload]++
		w := b.byWorkload[e.Workload]
		if w == nil {
			w = &workloadStats{outcomes: map[ledger.Outcome]int{}}
			b.byWorkload[e.Workload] = w
		}
		w.outcomes[o]++
		w.add(e)
	}
	if len(b.badIDs[o]) < 5 && o != ledger.OutcomeOK {
		b.badIDs[o] = append(b.badIDs[o], e.RequestID)
	}
	b.latencySamples.add(e)
	b.explain.done(e, o)
	at := e.Time.Add(-time.Duration(e.E2E * float64(time.Second)))
	if e.Scheduled != nil {
		at = *e.Scheduled
	}
	b.samples = append(b.samples, sample{at: at, ok: o == ledger.OutcomeOK})
	b.pd.done(e, o, at)
	b.tl.done(e, o, at)
	if o.SilentDrop() {
		b.dropCount++
		for _, st := range HeldAt(e.ServerDebug) {
			b.dropStages[st]++
		}
		if len(b.drops) < b.cfg.MaxDrops {
			b.drops = append(b.drops, SilentDrop{
				RequestID: e.RequestID, Workload: e.Workload, Session: e.Session, Turn: e.Turn,
				Outcome: o, Phase: e.Phase, Age: e.Age, ServerDebug: e.ServerDebug,
				At: e.Time.Sub(b.start).Seconds(), TraceID: e.TraceID,
			})
		}
	}
}

// Results computes the report. It may be called more than once.
func (b *Builder) Results() *Results {
	r := &Results{
		Scenario: b.scenario, Seed: b.seed, Target: b.target, Mode: b.mode,
		Start: b.start, End: b.end,
		Outcomes:   map[ledger.Outcome]int{},
		Assertions: []AssertionResult{},
		Drops:      b.drops,
		Workloads:  b.workloads,
		Arrivals:   b.arrivals.curves(b.start, b.cfg.ArrivalWorkloads),
		Leak:       b.leak,
		SelfCheck:  b.self,
		GPU:        b.gpu.result(),
		Notes:      append([]string(nil), b.notes...),
		Shard:      b.shard,
		Forensics:  append([]ForensicsBundle(nil), b.forensics...),
		Contention: b.contention.result(),
	}
	if b.shard.Merged() {
		var notes []string
		b.leak, notes = b.merged.judge(b.start)
		r.Leak = b.leak
		r.Notes = append(r.Notes, notes...)
	}
	for i, t := range slices.Sorted(maps.Keys(b.unknown)) {
		if i == 5 { // an edited or corrupt ledger can hold any number of types
			r.Notes = append(r.Notes, fmt.Sprintf("and %d more unknown event types", len(b.unknown)-5))
			break
		}
		r.Notes = append(r.Notes, fmt.Sprintf("the ledger has %s of unknown type %q (a newer harness wrote them?); they were ignored", format.Plural(b.unknown[t], "event"), t))
	}
	if b.prov != nil {
		p := *b.prov
		r.Provenance = &p
	}
	if r.Drops == nil {
		r.Drops = []SilentDrop{}
	}
	for _, o := range ledger.Outcomes {
		r.Outcomes[o] = b.outcomes[o]
		r.Requests += b.outcomes[o]
	}
	r.SilentDrops = b.dropCount
	if len(b.dropStages) > 0 {
		r.DropStages = b.dropStages
	}
	if !b.start.IsZero() {
		r.Duration = b.end.Sub(b.start).Seconds()
	}
	if r.Duration > 0 {
		r.Throughput = float64(r.Requests) / r.Duration
	}
	for _, done := range b.scheduled {
		if !done {
			r.Unresolved++
		}
	}
	b.retries.result(r)
	r.TTFT = percentiles(b.ttft)
	r.ITL = percentiles(b.itl)
	r.E2E = percentiles(b.e2e)
	r.Lag = percentiles(b.lag)
	r.Faults = b.faultResults()
	r.ByWorkload = b.workloadResults()
	r.PDPath, r.HealthLies = b.pd.result(b.pdOrigin(), b.pdMinShare()), b.pd.health.lies(b.pdOrigin())
	b.explain.results(r, b.start, b.cfg.CauseMargin)

	for _, a := range b.assertions() {
		res := b.evaluate(a, r)
		r.Assertions = append(r.Assertions, res)
		if res.Name == AssertNoLeaks && r.Leak == nil {
			// Listed but never run: the leak_check section says so rather than vanish.
			r.Leak = &CheckResult{State: StateNotEvaluated, Detail: res.Detail}
		}
	}
	if alive, ok := livenessCheck(r, b.assertions()); ok {
		r.Assertions = append(r.Assertions, alive)
	}

	// Invalid runs: the evidence cannot be trusted. Each reason is said once, here.
	for _, e := range b.runErrors() {
		r.InvalidReasons = append(r.InvalidReasons, "run failed: "+e)
	}
	if sh := b.shard; sh.Merged() && len(sh.Parts) != sh.Count {
		r.InvalidReasons = append(r.InvalidReasons, fmt.Sprintf("merged ledger holds %d of %d shards", len(sh.Parts), sh.Count))
	}
	if b.interrupt != "" {
		r.InvalidReasons = append(r.InvalidReasons, "interrupted before the run completed: "+Readable(b.interrupt))
	}
	if b.cutShort() {
		r.InvalidReasons = append(r.InvalidReasons, "interrupted before the run completed: the ledger has no run_end (the harness was killed, or ran out of memory or disk)")
	}
	if b.self != nil && !b.self.Passed {
		r.InvalidReasons = append(r.InvalidReasons, "harness self-check failed (the harness was the bottleneck): "+b.self.Detail)
	}
	for i, f := range r.Faults {
		switch {
		case f.Verified == nil || *f.Verified:
		case b.interrupt != "" && b.faults[i].cut:
			// The interrupt left it unproved: a reason from the interrupt, as
			// judgedOnEvidence counts them, not the fault's failure.
			r.InvalidReasons = append(r.InvalidReasons, fmt.Sprintf("fault %s (%s on %s) not evaluated: interrupted before its proof", f.Name, f.Type, f.Target))
		default:
			r.InvalidReasons = append(r.InvalidReasons, fmt.Sprintf("fault %s (%s on %s) did not take effect: %s", f.Name, f.Type, f.Target, f.Detail))
		}
	}
	for _, a := range r.Assertions {
		if a.State == StateNotEvaluated {
			r.InvalidReasons = append(r.InvalidReasons, fmt.Sprintf("%s not evaluated: %s", a.Name, a.Detail))
		}
	}
	if r.Unresolved > 0 {
		r.InvalidReasons = append(r.InvalidReasons, fmt.Sprintf("%s without a terminal outcome in the ledger", format.Plural(r.Unresolved, "scheduled request")))
	}
	if len(b.duplicate) > 0 {
		r.InvalidReasons = append(r.InvalidReasons, fmt.Sprintf("%s with more than one terminal outcome (first: %s)", format.Plural(len(b.duplicate), "request"), b.duplicate[0]))
	}
	if r.Requests == 0 {
		r.InvalidReasons = append(r.InvalidReasons, "no request reached a terminal outcome")
	}
	switch {
	case b.judgedOnEvidence(r):
		r.Verdict = VerdictFail
	case len(r.InvalidReasons) > 0:
		r.Verdict = VerdictInvalid
	case r.Passed():
		r.Verdict = VerdictPass
	default:
		r.Verdict = VerdictFail
	}
	return r
}
