package scenarios

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"pdsoak/assertion"
	"pdsoak/kernels"
	"pdsoak/server/scheduler"
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

func (v *validator) checkURL(path, s string) {
	if s == "" {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(path, "must be an http:// or https:// URL with a host, got %q", s)
	}
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

func (v *validator) checkTarget() {
	sc := v.sc
	if refs := LinkRefs(sc.Target.URL); len(refs) > 0 {
		// The proxy's address is known only when the run starts.
		for _, ref := range refs {
			if !v.hasLink(ref) {
				v.add("target.url", "{link:%s} names no link of target.links", ref)
			}
		}
	} else {
		v.checkURL("target.url", sc.Target.URL)
	}
	v.checkURL("target.metrics_url", sc.Target.MetricsURL)
	v.checkURL("target.debug_url", sc.Target.DebugURL)
	if sc.Target.Model == "" {
		v.add("target.model", "must be set")
	}
	if len(sc.Target.Launch) > 0 && sc.Target.URL == "" {
		v.add("target.launch", "needs target.url: the address where the launched processes serve the API")
	}
	names := map[string]bool{}
	for i, l := range sc.Target.Launch {
		p := fmt.Sprintf("target.launch[%d]", i)
		switch {
		case l.Name == "":
			v.add(p+".name", "must be set")
		case !nameRE.MatchString(l.Name):
			v.add(p+".name", "must be letters, digits, '.', '_' or '-', got %q", l.Name)
		case names[l.Name]:
			v.add(p+".name", "duplicate process name %q", l.Name)
		}
		names[l.Name] = true
		switch l.Role {
		case "router", "prefill", "decode", "colocated":
		default:
			v.add(p+".role", "must be router, prefill, decode or colocated, got %q", l.Role)
		}
		if _, err := SplitWords(l.Launcher); err != nil {
			v.add(p+".launcher", "%s", strings.TrimPrefix(err.Error(), "scenarios: "))
		}
		if _, err := SplitWords(l.ExtraArgs); err != nil {
			v.add(p+".extra_args", "%s", strings.TrimPrefix(err.Error(), "scenarios: "))
		}
		if argv, err := l.Argv(); err == nil && (len(argv) == 0 || argv[0] == "") {
			v.add(p+".command", "must name a program: [program, arg, ...] (or set launcher)")
		}
		v.checkURL(p+".health_url", l.HealthURL)
		v.checkURL(p+".metrics_url", l.MetricsURL)
		if l.StartTimeout < 0 {
			v.add(p+".start_timeout", "must be ≥ 0")
		}
		for j, arg := range l.Command {
			for _, ref := range LinkRefs(arg) {
				if !v.hasLink(ref) {
					v.add(fmt.Sprintf("%s.command[%d]", p, j), "{link:%s} names no link of target.links", ref)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sc.Target.MetricsURLs)) {
		p := "target.metrics_urls." + name
		if !nameRE.MatchString(name) {
			v.add(p, "the process name must be letters, digits, '.', '_' or '-', got %q", name)
		}
		if sc.Target.MetricsURLs[name] == "" {
			v.add(p, "must be a URL")
		}
		v.checkURL(p, sc.Target.MetricsURLs[name])
	}
	if len(sc.Target.Links) > 0 && len(sc.Target.Launch) == 0 {
		v.add("target.links", "needs target.launch: the harness can proxy only links of processes it starts")
	}
	lnames := map[string]bool{}
	for i, k := range sc.Target.Links {
		p := fmt.Sprintf("target.links[%d]", i)
		switch {
		case k.Name == "" || strings.ContainsAny(k.Name, " \t{}:"):
			v.add(p+".name", "must be a link name such as router->prefill, got %q", k.Name)
		case lnames[k.Name]:
			v.add(p+".name", "duplicate link name %q", k.Name)
		}
		lnames[k.Name] = true
		if _, port, err := net.SplitHostPort(k.Upstream); err != nil || port == "" {
			v.add(p+".upstream", "must be host:port, got %q", k.Upstream)
		}
	}
}

func (v *validator) hasLink(name string) bool {
	for _, k := range v.sc.Target.Links {
		if k.Name == name {
			return true
		}
	}
	return false
}

// LinkRefs returns the link names an argument refers to with {link:NAME} or
// {link-port:NAME}.
func LinkRefs(arg string) []string {
	var out []string
	for _, m := range linkRefRE.FindAllStringSubmatch(arg, -1) {
		out = append(out, m[2])
	}
	return out
}

// linkRefRE matches {link:NAME} and {link-port:NAME}.
var linkRefRE = regexp.MustCompile(`\{(link|link-port):([^{}\s]+)\}`)

// ExpandLinks replaces {link:NAME} with addr(NAME) (host:port) and {link-port:NAME}
// with its port. It is how a launched command reaches a proxy whose port is chosen only
// when the run starts.
func ExpandLinks(arg string, addr func(name string) (string, error)) (string, error) {
	var firstErr error
	out := linkRefRE.ReplaceAllStringFunc(arg, func(m string) string {
		sub := linkRefRE.FindStringSubmatch(m)
		a, err := addr(sub[2])
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return m
		}
		if sub[1] == "link-port" {
			if _, port, err := net.SplitHostPort(a); err == nil {
				return port
			}
		}
		return a
	})
	return out, firstErr
}

func (v *validator) checkReference() {
	ref := v.sc.Reference
	if ref.Prefill < 0 {
		v.add("reference.prefill", "must be ≥ 0")
	}
	if ref.Decode < 0 {
		v.add("reference.decode", "must be ≥ 0")
	}
	if (ref.Prefill == 0) != (ref.Decode == 0) {
		v.add("reference", "prefill and decode must both be ≥ 1 (PD) or both 0 (colocated), got %d and %d", ref.Prefill, ref.Decode)
	}
	if ref.Prefill > 16 || ref.Decode > 16 {
		v.add("reference", "at most 16 prefill and 16 decode workers")
	}
	v.oneOf("reference.backend", ref.Backend, kernels.Backends()...)
	v.oneOf("reference.semantics", ref.Semantics, scheduler.SemanticsNames()...)
	if ref.StartTimeout < 0 {
		v.add("reference.start_timeout", "must be ≥ 0")
	}
	if ref.Netns && ref.Prefill == 0 && ref.Decode == 0 {
		v.add("reference.netns", "needs a PD topology (prefill and decode ≥ 1), not colocated")
	}
	if ref.NetnsPrefix != "" && !ref.Netns {
		v.add("reference.netns_prefix", "is set but reference.netns is false")
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

// checkLimits checks the deadlines, the drain, the recovery parameters and the self check.
func (v *validator) checkLimits() {
	sc := v.sc
	d := sc.Deadlines
	for _, f := range []struct {
		name string
		val  Duration
	}{{"connect", d.Connect}, {"first_token", d.FirstToken}, {"stall", d.Stall}, {"total", d.Total}} {
		if f.val <= 0 {
			v.add("deadlines."+f.name, "must be > 0")
		} else if f.name != "total" && d.Total > 0 && f.val > d.Total {
			v.add("deadlines."+f.name, "(%s) must not exceed deadlines.total (%s)", f.val, d.Total)
		}
	}
	if sc.Drain.Timeout <= 0 {
		v.add("drain.timeout", "must be > 0")
	}
	if sc.Drain.LeakTimeout <= 0 {
		v.add("drain.leak_timeout", "must be > 0")
	}
	if r := sc.Recovery; r.Window <= 0 {
		v.add("recovery.window", "must be > 0")
	}
	if r := sc.Recovery; r.Within <= 0 {
		v.add("recovery.within", "must be > 0")
	}
	if r := sc.Recovery; r.Threshold <= 0 || r.Threshold > 1 {
		v.add("recovery.threshold", "must be a fraction in (0, 1], got %g", r.Threshold)
	}
	if sc.SelfCheck.MaxLag <= 0 {
		v.add("self_check.max_lag", "must be > 0")
	}
	if w := sc.Forensics.WedgedAfter; w < 0 || (w > 0 && w.D() < time.Second) {
		v.add("forensics.wedged_after", "must be 0 (off) or at least 1s, got %v", w)
	}
}

// checkAssertions parses every assertion and refuses the ones the run could not
// evaluate: a listed assertion that cannot be judged must never read as a pass.
func (v *validator) checkAssertions() {
	sc := v.sc
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
		case pa.Name == assertion.AssertNoLeaks && !sc.HasMetrics():
			v.add(p, "no_leaks cannot be evaluated: an external target has no metrics endpoint unless target.metrics_url (or --metrics-url) names one; set it, or remove no_leaks")
		case pa.Name == assertion.AssertRecovery && len(sc.specFaults()) == 0:
			v.add(p, "recovery cannot be evaluated: the scenario injects no fault; add a fault, or remove recovery")
		case pa.Name == assertion.AssertRecovery && len(sc.Faults) == 0:
			v.add(p, "recovery cannot be evaluated: no fault ends before the end of load (duration %s); lengthen the duration, or remove recovery", sc.Duration)
		}
	}
}

// checkFaultTimeline checks fault_timeline; the faults themselves are checked against
// it by checkFaultWindow.
func (v *validator) checkFaultTimeline() {
	sc := v.sc
	ft := sc.FaultTimeline
	switch ft.mode() {
	case CoverFixed:
		if ft.Period != 0 {
			v.add("fault_timeline.period", "only applies with cover: repeat or scale")
		}
		return
	case CoverRepeat, CoverScale:
	default:
		v.oneOf("fault_timeline.cover", ft.Cover, CoverFixed, CoverRepeat, CoverScale)
		return
	}
	spec := sc.specFaults()
	if ft.Period < 0 {
		v.add("fault_timeline.period", "must be > 0")
		return
	}
	if len(spec) == 0 {
		return
	}
	period := ft.period(spec)
	if period <= 0 {
		v.add("fault_timeline", "cover: %s needs a period: every fault starts at 0s and is held, so the list has no length", ft.Cover)
		return
	}
	if ft.mode() == CoverRepeat {
		if n := repeatCount(spec, period, sc.Duration); n > MaxInjections {
			v.add("fault_timeline.period", "repeating every %s over %s makes more than %d injections; lengthen the period", period, sc.Duration, MaxInjections)
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
	}
	if w.PromptTokens < 1 {
		v.add(p+".prompt_tokens", "must be ≥ 1")
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
	if pc.Rate > 100000 {
		v.add(p+".rate", "must be ≤ 100000 requests per second")
	}
}

func (v *validator) checkFault(i int, f Fault, topo Topology, names map[string]bool, o options) {
	p := fmt.Sprintf("faults[%d]", i)
	switch {
	case f.Name == "":
		v.add(p+".name", "must be set")
	case names[f.Name]:
		v.add(p+".name", "duplicate fault name %q", f.Name)
	case v.sc.FaultTimeline.mode() == CoverRepeat && strings.Contains(f.Name, "#"):
		v.add(p+".name", "must not contain '#' with cover: repeat (the later cycles are named %s#2, %s#3, ...)", f.Name, f.Name)
	}
	names[f.Name] = true
	var ft FaultType
	known := true
	if f.Type == "" {
		v.add(p+".type", "must be set")
		known = false
	} else if o.faultTypes != nil {
		ft, known = o.faultTypes[f.Type]
		if !known {
			list := slices.Sorted(maps.Keys(o.faultTypes))
			hint := ""
			if s := suggest.Closest(f.Type, list); s != "" {
				hint = fmt.Sprintf("did you mean %q? ", s)
			}
			v.add(p+".type", "unknown fault type %q (%sknown: %s)", f.Type, hint, strings.Join(list, ", "))
		}
	}
	kind, ok := topo.Resolve(f.Target)
	switch {
	case f.Target == "":
		v.add(p+".target", "must be set (%s)", describeTargets(topo, ft.Targets))
	case !ok:
		v.add(p+".target", "%q does not exist in this topology (%s)", f.Target, describeTargets(topo, ft.Targets))
	case known && ft.Targets != 0 && ft.Targets&kind == 0:
		v.add(p+".target", "fault type %s needs a %s target, and %q is a %s (%s)", f.Type, ft.Targets, f.Target, kind, describeTargets(topo, ft.Targets))
	}
	v.checkFaultWindow(p, f)
	if known && ft.Check != nil {
		if err := ft.Check(f); err != nil {
			v.add(p+".params", "%v", err)
		}
	}
}

// checkFaultWindow checks when a fault (as written) runs. With a fixed timeline it must
// lie within the duration; repeated or scaled, within one period (the expansion fits the
// injections into the duration).
func (v *validator) checkFaultWindow(p string, f Fault) {
	sc := v.sc
	if f.At < 0 {
		v.add(p+".at", "must be ≥ 0")
	}
	if f.For < 0 {
		v.add(p+".for", "must be ≥ 0 (0: until the end of load)")
	}
	if f.At < 0 || f.For < 0 {
		return
	}
	if f.At+f.For < f.At {
		v.add(p+".for", "at + for is too large")
		return
	}
	switch sc.FaultTimeline.mode() {
	case CoverFixed:
		if sc.Duration > 0 && f.At >= sc.Duration {
			v.add(p+".at", "(%s) must be before the end of load (duration %s)", f.At, sc.Duration)
		} else if f.For > 0 && sc.Duration > 0 && f.At+f.For > sc.Duration {
			v.add(p+".for", "at + for (%s) exceeds the scenario's duration (%s)", f.At+f.For, sc.Duration)
		}
	case CoverRepeat:
		if f.For == 0 {
			v.add(p+".for", "must be > 0 with cover: repeat (a fault held until the end of load cannot repeat)")
		} else if sc.FaultTimeline.Period > 0 && f.At+f.For > sc.FaultTimeline.Period {
			v.add(p+".for", "at + for (%s) exceeds fault_timeline.period (%s): the cycles would overlap", f.At+f.For, sc.FaultTimeline.Period)
		}
	case CoverScale:
		if period := sc.FaultTimeline.period(sc.specFaults()); period > 0 && f.At >= period {
			v.add(p+".at", "(%s) must be before the end of fault_timeline.period (%s)", f.At, period)
		} else if sc.FaultTimeline.Period > 0 && f.At+f.For > sc.FaultTimeline.Period {
			v.add(p+".for", "at + for (%s) exceeds fault_timeline.period (%s): scaled, it would end after the load", f.At+f.For, sc.FaultTimeline.Period)
		}
	}
}

func describeTargets(topo Topology, kind TargetKind) string {
	if kind == 0 {
		kind = TargetAny
	}
	names := topo.Names(kind)
	if len(names) == 0 {
		return "this topology has no " + kind.String() + " targets"
	}
	return "valid targets: " + strings.Join(names, ", ")
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
