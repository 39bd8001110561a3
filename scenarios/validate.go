package scenarios

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"pdsoak/assertion"
	"pdsoak/suggest"
)

// FaultType describes a fault type known to the chaos package, for validation.
type FaultType struct {
	// Targets are the kinds of target the fault accepts (0: any).
	Targets TargetKind
	// Check validates the fault's params (optional). Its error message is reported at
	// the fault's line under faults[i].params.
	Check func(Fault) error
}

// Option configures Load, Parse and Validate.
type Option func(*options)

type options struct {
	faultTypes map[string]FaultType
	overrides  []func(*Scenario)
	lookup     LookupEnv
	refCheck   ReferenceCheck
}

// WithEnv sets where ${VAR} references in the scenario are looked up (Load and Parse
// only; default os.LookupEnv).
func WithEnv(lookup LookupEnv) Option {
	return func(o *options) { o.lookup = lookup }
}

// WithOverrides runs fn on the decoded scenario before defaults are applied and before
// validation (Load and Parse only): command-line overrides such as --duration, --seed
// and --target go here so that derived defaults and validation see them.
func WithOverrides(fn func(*Scenario)) Option {
	return func(o *options) { o.overrides = append(o.overrides, fn) }
}

// WithFaultTypes sets the fault types a scenario may use (the chaos registry). Without
// it, fault types are not checked against a list; targets still are.
func WithFaultTypes(types map[string]FaultType) Option {
	return func(o *options) { o.faultTypes = types }
}

// WithKnownFaults is WithFaultTypes for a plain list of names accepting any target.
func WithKnownFaults(names ...string) Option {
	m := make(map[string]FaultType, len(names))
	for _, n := range names {
		m[n] = FaultType{}
	}
	return WithFaultTypes(m)
}

// maxLength bounds token and byte counts: far beyond any model's context, it keeps a
// typo (a few extra digits) from building prompts that exhaust memory, or overflow.
const maxLength = 1 << 24

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate checks the scenario (after ApplyDefaults) and reports every problem at once
// as Problems, each with file, line and field path. It returns nil when all is well.
func (sc *Scenario) Validate(opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	v := &validator{sc: sc}
	v.check(o)
	if len(v.problems) == 0 {
		return nil
	}
	sort.SliceStable(v.problems, func(i, j int) bool { return v.problems[i].Line < v.problems[j].Line })
	return v.problems
}

type validator struct {
	sc       *Scenario
	problems Problems
}

// line finds the line of path, or of its closest ancestor present in the source.
func (v *validator) line(path string) int {
	for p := path; p != ""; {
		if l := v.sc.Line(p); l > 0 {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// add records a problem at the line of path. A value that came from an anchor is
// reported at the entry that uses it, and the message says where the anchor set it.
func (v *validator) add(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if a, ok := v.sc.anchored[path]; ok {
		msg += fmt.Sprintf(" (set by anchor &%s, line %d)", a.Name, a.Line)
	}
	v.problems = append(v.problems, Problem{File: v.sc.File, Line: v.line(path), Path: path, Msg: msg})
}

// check runs every check; each part adds its problems and none stops the others.
func (v *validator) check(o options) {
	sc := v.sc
	if sc.Name == "" {
		v.add("name", "must be set")
	} else if !nameRE.MatchString(sc.Name) || len(sc.Name) > 100 {
		v.add("name", "must be letters, digits, '.', '_' or '-' (it names the output directory), got %q", sc.Name)
	}
	if sc.Duration <= 0 {
		v.add("duration", "must be > 0")
	} else if sc.Duration > MaxDuration { // --duration bypasses ParseDuration
		v.add("duration", "must be at most 8760h (a year), got %s", sc.Duration)
	}
	v.checkTarget()
	v.checkClient() // headers.go
	v.checkReference()
	v.checkReferenceArgs(o)
	if len(sc.Workloads) == 0 {
		v.add("workloads", "at least one workload is required")
	}
	wnames := map[string]bool{}
	for i, w := range sc.Workloads {
		v.checkWorkload(i, w, wnames)
	}
	v.checkLimits()
	v.checkAssertions()
	v.checkPDCounters() // pdcounters.go
	v.checkFaultTimeline()
	v.checkExplore()
	topo := sc.Topology()
	fnames := map[string]bool{}
	for i, f := range sc.specFaults() {
		v.checkFault(i, f, topo, fnames, o)
	}
}

// oneOf checks that value is one of a closed set, with a "did you mean" for a typo.
func (v *validator) oneOf(path, value string, set ...string) {
	if slices.Contains(set, value) {
		return
	}
	msg := fmt.Sprintf("must be %s, got %q", orList(set), value)
	if s := suggest.Closest(value, set); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	v.add(path, "%s", msg)
}

// orList formats a, b or c.
func orList(set []string) string {
	if len(set) < 2 {
		return strings.Join(set, "")
	}
	return strings.Join(set[:len(set)-1], ", ") + " or " + set[len(set)-1]
}

// checkAssertions parses every assertion and refuses the ones the run could not
// evaluate: a listed assertion that cannot be judged must never read as a pass.
func (v *validator) checkAssertions() {
	sc := v.sc
	if len(sc.Assertions) == 0 && sc.IsSet("assertions") {
		v.add("assertions", "is empty, so the run would pass whatever happens; list at least one, or leave the key out for the defaults")
	}
	seen := map[string]bool{}
	for i, a := range sc.Assertions {
		p := fmt.Sprintf("assertions[%d]", i)
		pa, err := assertion.ParseAssertion(a)
		if err != nil {
			v.add(p, "%s", strings.TrimPrefix(err.Error(), "assertion: "))
			continue
		}
		if seen[pa.Name] {
			v.add(p, "duplicate assertion %q", pa.Name)
		}
		seen[pa.Name] = true
		switch {
		case pa.Consistent() && !sc.hasProbe():
			v.add(p, "%s cannot be evaluated: no workload of type probe sends the probe prompts; add one, or remove it", pa.Name)
		case pa.Latency() && pa.Arg == "itl" && !sc.streamsGaps():
			v.add(p, "%s cannot be evaluated: no workload streams more than one token (stream: true, max_tokens ≥ 2), so there is no gap between tokens; stream one, or remove it", pa.Name)
		case pa.Name == assertion.AssertNoLeaks && !sc.HasMetrics():
			v.add(p, "no_leaks cannot be evaluated: an external target has no metrics endpoint unless target.metrics_url (or --metrics-url) names one; set it, or remove no_leaks")
		case pa.Name == assertion.AssertRecovery && len(sc.specFaults()) == 0:
			v.add(p, "recovery cannot be evaluated: the scenario injects no fault; add a fault, or remove recovery")
		case pa.Name == assertion.AssertRecovery && len(sc.Faults) == 0:
			v.add(p, "recovery cannot be evaluated: no fault ends before the end of load (duration %s); lengthen the duration, or remove recovery", sc.Duration)
		}
	}
}

func (v *validator) checkWorkload(i int, w Workload, names map[string]bool) {
	p := fmt.Sprintf("workloads[%d]", i)
	switch {
	case w.Name == "":
		v.add(p+".name", "must be set")
	case !nameRE.MatchString(w.Name):
		v.add(p+".name", "must be letters, digits, '.', '_' or '-', got %q", w.Name)
	case w.Name == "client":
		v.add(p+".name", `"client" is reserved (it names every workload in fault targets)`)
	case names[w.Name]:
		v.add(p+".name", "duplicate workload name %q", w.Name)
	}
	names[w.Name] = true
	switch w.Type {
	case WorkloadAgents, WorkloadOpenLoop, WorkloadBurst, WorkloadProbe, WorkloadTrace:
	case "":
		v.add(p+".type", "must be set: agents, open_loop, burst, probe or trace")
	default:
		v.add(p+".type", "must be agents, open_loop, burst, probe or trace, got %q", w.Type)
	}
	switch w.Endpoint {
	case EndpointChat, EndpointCompletions:
	default:
		v.add(p+".endpoint", "must be chat or completions, got %q", w.Endpoint)
	}
	if w.MaxTokens < 1 {
		v.add(p+".max_tokens", "must be ≥ 1")
	} else if w.MaxTokens > maxLength {
		v.add(p+".max_tokens", "must be ≤ %d", maxLength)
	}
	if w.PromptTokens < 1 {
		v.add(p+".prompt_tokens", "must be ≥ 1")
	} else if w.PromptTokens > maxLength {
		v.add(p+".prompt_tokens", "must be ≤ %d", maxLength)
	}
	if w.Temperature < 0 || w.Temperature > 2 {
		v.add(p+".temperature", "must be between 0 and 2")
	}
	v.checkWorkloadFields(p, w)
	v.checkTrace(p, w)
	switch w.Type {
	case WorkloadAgents:
		v.checkAgents(p, w)
	case WorkloadOpenLoop:
		v.checkPacer(p+".pacer", w.Pacer)
		v.checkLinearWindow(p+".pacer", w)
		if w.Count < 0 {
			v.add(p+".count", "must be ≥ 0 (0: no cap)")
		}
		if w.MaxInFlight < 0 {
			v.add(p+".max_in_flight", "must be ≥ 0 (0: no cap)")
		}
	case WorkloadBurst:
		if w.Count < 1 {
			v.add(p+".count", "must be ≥ 1")
		} else if w.Count > 100000 {
			v.add(p+".count", "must be ≤ 100000")
		}
	case WorkloadProbe:
		if w.Count < 1 || w.Count > 100 {
			v.add(p+".count", "must be in [1, 100] (distinct probe prompts)")
		}
		if w.Interval <= 0 {
			v.add(p+".interval", "must be > 0")
		}
		if w.Temperature != 0 {
			v.add(p+".temperature", "must be 0: probes are greedy, so a correct server answers each the same way")
		}
	}
	v.checkWorkloadWindow(p, w)
}

// checkWorkloadFields refuses fields set on a workload type they do not apply to: a set
// field on the wrong type is a mistake.
func (v *validator) checkWorkloadFields(p string, w Workload) {
	only := func(field, typ string) {
		if w.Type != typ && w.Type != "" && v.sc.IsSet(p+"."+field) {
			v.add(p+"."+field, "only applies to type %s, not %s", typ, w.Type)
		}
	}
	for _, f := range []string{"agents", "turns", "tool_result_bytes", "tool_latency", "think_time", "retries", "restart"} {
		only(f, WorkloadAgents)
	}
	only("pacer", WorkloadOpenLoop)
	only("max_in_flight", WorkloadOpenLoop)
	only("interval", WorkloadProbe)
	if w.Type == WorkloadAgents && v.sc.IsSet(p+".count") {
		v.add(p+".count", "only applies to types burst and open_loop")
	}
}

func (v *validator) checkAgents(p string, w Workload) {
	if w.Agents < 1 {
		v.add(p+".agents", "must be ≥ 1")
	} else if w.Agents > 10000 {
		v.add(p+".agents", "must be ≤ 10000")
	}
	if w.Turns < 0 {
		v.add(p+".turns", "must be ≥ 0 (0: until the window ends)")
	}
	if w.ToolResultBytes < 0 {
		v.add(p+".tool_result_bytes", "must be ≥ 0")
	} else if w.ToolResultBytes > maxLength {
		v.add(p+".tool_result_bytes", "must be ≤ %d", maxLength)
	}
	if w.ToolLatency < 0 {
		v.add(p+".tool_latency", "must be ≥ 0")
	}
	if w.ThinkTime < 0 {
		v.add(p+".think_time", "must be ≥ 0")
	}
	if w.Retries < 0 {
		v.add(p+".retries", "must be ≥ 0")
	} else if w.Retries > 100 {
		v.add(p+".retries", "must be ≤ 100")
	}
	if w.Restart && w.Turns == 0 {
		v.add(p+".restart", "needs turns ≥ 1 (turns 0 already runs until the window ends)")
	}
}

// checkWorkloadWindow checks that a workload's window lies within the scenario's duration.
func (v *validator) checkWorkloadWindow(p string, w Workload) {
	sc := v.sc
	if w.Start < 0 {
		v.add(p+".start", "must be ≥ 0")
	} else if w.Start >= sc.Duration && sc.Duration > 0 {
		v.add(p+".start", "(%s) must be before the end of the scenario (duration %s)", w.Start, sc.Duration)
	}
	if w.Duration < 0 {
		v.add(p+".duration", "must be ≥ 0")
	} else if sc.Duration > 0 && w.Start >= 0 && w.Start < sc.Duration && w.Start+w.Duration > sc.Duration {
		v.add(p+".duration", "start + duration (%s) exceeds the scenario's duration (%s)", w.Start+w.Duration, sc.Duration)
	}
}

func (v *validator) checkPacer(p string, pc *Pacer) {
	if pc == nil {
		v.add(p, "open_loop needs a pacer: {type: constant|linear|sine|poisson, rate: N}")
		return
	}
	switch pc.Type {
	case PacerConstant, PacerPoisson:
		if pc.Rate <= 0 {
			v.add(p+".rate", "must be > 0 requests per second")
		}
	case PacerLinear:
		if pc.Rate < 0 {
			v.add(p+".rate", "must be ≥ 0 requests per second")
		}
		if pc.Slope == 0 {
			v.add(p+".slope", "must be set for a linear pacer (requests per second, per second)")
		}
	case PacerSine:
		if pc.Rate <= 0 {
			v.add(p+".rate", "must be > 0 requests per second")
		}
		if pc.Period <= 0 {
			v.add(p+".period", "must be > 0 for a sine pacer")
		}
		if pc.Amplitude < 0 || pc.Amplitude > pc.Rate {
			v.add(p+".amplitude", "must be between 0 and rate (%g)", pc.Rate)
		}
	default:
		v.add(p+".type", "must be constant, linear, sine or poisson, got %q", pc.Type)
	}
	// Another pacer type's field would be ignored: arrivals not what the file says.
	known := slices.Contains([]string{PacerConstant, PacerLinear, PacerSine, PacerPoisson}, pc.Type)
	for _, f := range []struct {
		field, typ string
		set        bool
	}{{"slope", PacerLinear, pc.Slope != 0}, {"amplitude", PacerSine, pc.Amplitude != 0}, {"period", PacerSine, pc.Period != 0}} {
		if known && f.set && pc.Type != f.typ {
			v.add(p+"."+f.field, "only applies to a %s pacer, not %s", f.typ, pc.Type)
		}
	}
	if pc.Rate > 100000 {
		v.add(p+".rate", "must be ≤ 100000 requests per second")
	}
}

// checkLinearWindow refuses a linear pacer whose rate falls to 0 before its window
// ends: vegeta's pacer stops there, and the rest of the window sends nothing.
func (v *validator) checkLinearWindow(p string, w Workload) {
	pc := w.Pacer
	if pc == nil || pc.Type != PacerLinear || pc.Slope >= 0 || pc.Rate <= 0 {
		return
	}
	window := w.Duration
	if window == 0 {
		window = v.sc.Duration - w.Start
	}
	zero := time.Duration(-pc.Rate / pc.Slope * float64(time.Second))
	if window > 0 && zero < window.D() {
		v.add(p+".slope", "the rate falls to 0 req/s %s into the workload's %s window (rate %g + slope %g per second); a linear pacer stops there", zero, window, pc.Rate, pc.Slope)
	}
}

// streamsGaps reports whether a workload can yield inter-token gaps (itl): only a
// streamed answer of two tokens or more has one.
func (sc *Scenario) streamsGaps() bool {
	for _, w := range sc.Workloads {
		if w.Stream && w.MaxTokens >= 2 {
			return true
		}
	}
	return false
}

// hasProbe reports whether a workload sends probe prompts (consistent_outputs).
func (sc *Scenario) hasProbe() bool {
	for _, w := range sc.Workloads {
		if w.Type == WorkloadProbe {
			return true
		}
	}
	return false
}
