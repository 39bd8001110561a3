package scenarios

import (
	"fmt"
	"path"
	"strings"
	"time"

	"pdsoak/assertion"
)

// Exported defaults, applied by ApplyDefaults.
const (
	DefaultSeed            = 1
	DefaultDuration        = Duration(30 * time.Second)
	DefaultModel           = "ref"
	DefaultBackend         = "tinyref"
	DefaultSemantics       = "strict"
	DefaultAgents          = 30
	DefaultTurns           = 4
	DefaultMaxTokens       = 16
	DefaultToolResultBytes = 256
	DefaultPromptTokens    = 32
	DefaultConnect         = Duration(2 * time.Second)
	DefaultFirstToken      = Duration(10 * time.Second)
	DefaultStall           = Duration(5 * time.Second)
	DefaultTotal           = Duration(30 * time.Second)
	DefaultDrainExtra      = Duration(5 * time.Second) // drain.timeout = deadlines.total + this
	DefaultLeakTimeout     = Duration(15 * time.Second)
	DefaultRecoveryWindow  = Duration(5 * time.Second)
	DefaultRecoveryWithin  = Duration(30 * time.Second)
	DefaultRecoveryThresh  = 0.9
	DefaultMaxLag          = Duration(250 * time.Millisecond)
	DefaultRefStartTimeout = Duration(60 * time.Second)
	DefaultLaunchTimeout   = Duration(120 * time.Second)
)

// ApplyDefaults fills every field the scenario left out and expands a repeated or scaled
// fault timeline into concrete injections. It is idempotent. For a scenario decoded from
// YAML, booleans with a true default (workloads[].stream) are set only when the key was
// absent; for a scenario built in Go, booleans are left as they are.
func (sc *Scenario) ApplyDefaults() {
	if sc.Name == "" && sc.File != "" {
		base := path.Base(strings.ReplaceAll(sc.File, "\\", "/"))
		sc.Name = strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
	}
	if !sc.IsSet("seed") && sc.Seed == 0 {
		sc.Seed = DefaultSeed
	}
	if sc.Duration == 0 {
		sc.Duration = DefaultDuration
	}
	if sc.Target.Model == "" {
		sc.Target.Model = DefaultModel
	}
	for i := range sc.Target.Launch {
		if sc.Target.Launch[i].StartTimeout == 0 {
			sc.Target.Launch[i].StartTimeout = DefaultLaunchTimeout
		}
	}
	sc.referenceDefaults()
	for i := range sc.Workloads {
		sc.workloadDefaults(i)
	}
	sc.limitDefaults()
	sc.faultDefaults()
	sc.assertionDefaults()
	sc.exploreDefaults()
}

func (sc *Scenario) referenceDefaults() {
	ref := &sc.Reference
	if !sc.IsSet("reference.prefill") && !sc.IsSet("reference.decode") && ref.Prefill == 0 && ref.Decode == 0 {
		ref.Prefill, ref.Decode = 1, 1
	}
	if ref.Backend == "" {
		ref.Backend = DefaultBackend
	}
	if ref.Semantics == "" {
		ref.Semantics = DefaultSemantics
	}
	if ref.StartTimeout == 0 {
		ref.StartTimeout = DefaultRefStartTimeout
	}
}

func (sc *Scenario) workloadDefaults(i int) {
	w := &sc.Workloads[i]
	p := fmt.Sprintf("workloads[%d]", i)
	defer traceDefaults(w)
	if w.Name == "" && w.Type != "" {
		w.Name = fmt.Sprintf("%s-%d", w.Type, i)
	}
	if w.Endpoint == "" {
		w.Endpoint = EndpointChat
	}
	if sc.set != nil && !sc.IsSet(p+".stream") {
		w.Stream = true
	}
	if w.MaxTokens == 0 && !sc.IsSet(p+".max_tokens") {
		w.MaxTokens = DefaultMaxTokens
	}
	if w.PromptTokens == 0 && !sc.IsSet(p+".prompt_tokens") {
		w.PromptTokens = DefaultPromptTokens
	}
	if w.Type == WorkloadProbe {
		if w.Count == 0 && !sc.IsSet(p+".count") {
			w.Count = 3
		}
		if w.Interval == 0 && !sc.IsSet(p+".interval") {
			w.Interval = Duration(time.Second)
		}
	}
	if w.Type == WorkloadAgents {
		if w.Agents == 0 && !sc.IsSet(p+".agents") {
			w.Agents = DefaultAgents
		}
		if w.Turns == 0 && !sc.IsSet(p+".turns") {
			w.Turns = DefaultTurns
		}
		if w.ToolResultBytes == 0 && !sc.IsSet(p+".tool_result_bytes") {
			w.ToolResultBytes = DefaultToolResultBytes
		}
	}
	if w.Duration == 0 && w.Start < sc.Duration {
		w.Duration = sc.Duration - w.Start
	}
}

// limitDefaults fills the deadlines, the drain, the recovery parameters and the self check.
func (sc *Scenario) limitDefaults() {
	d := &sc.Deadlines
	if d.Connect == 0 {
		d.Connect = DefaultConnect
	}
	if d.FirstToken == 0 {
		d.FirstToken = DefaultFirstToken
	}
	if d.Stall == 0 {
		d.Stall = DefaultStall
	}
	if d.Total == 0 {
		d.Total = DefaultTotal
	}
	if sc.Drain.Timeout == 0 {
		sc.Drain.Timeout = d.Total + DefaultDrainExtra
	}
	if sc.Drain.LeakTimeout == 0 {
		sc.Drain.LeakTimeout = DefaultLeakTimeout
	}
	r := &sc.Recovery
	if r.Window == 0 {
		r.Window = DefaultRecoveryWindow
	}
	if r.Within == 0 {
		r.Within = DefaultRecoveryWithin
	}
	if r.Threshold == 0 && !sc.IsSet("recovery.threshold") {
		r.Threshold = DefaultRecoveryThresh
	}
	if sc.SelfCheck.MaxLag == 0 {
		sc.SelfCheck.MaxLag = DefaultMaxLag
	}
}

// faultDefaults names the faults, expands the fault timeline (the list as written is kept
// for validation, so that problems point at its lines) and turns on what faults need in
// the reference topology.
func (sc *Scenario) faultDefaults() {
	if sc.faultSpec == nil {
		sc.faultSpec = sc.Faults
	}
	spec := sc.faultSpec
	for i := range spec {
		if spec[i].Name == "" && spec[i].Type != "" {
			spec[i].Name = fmt.Sprintf("%s-%d", spec[i].Type, i)
		}
	}
	sc.Faults = expandFaults(sc.FaultTimeline, spec, sc.Duration)
	ref := &sc.Reference
	if len(spec) > 0 && !sc.IsSet("reference.fault_injection") {
		ref.FaultInjection = true
	}
	if !sc.IsSet("reference.proxies") && sc.Target.URL == "" {
		topo := sc.Topology()
		for _, f := range spec {
			if k, ok := topo.Resolve(f.Target); ok && k == TargetLink {
				ref.Proxies = true
			}
		}
	}
}

// assertionDefaults lists the built-in assertions that can be evaluated: no_leaks only
// with a metrics endpoint and recovery only when a fault is injected, so that the
// defaults never add an assertion that validation would refuse.
func (sc *Scenario) assertionDefaults() {
	if sc.Assertions != nil || sc.IsSet("assertions") {
		return
	}
	sc.Assertions = []string{assertion.AssertNoSilentDrops, assertion.AssertValidResponses, assertion.AssertExplainedErrors}
	if sc.HasMetrics() {
		sc.Assertions = append(sc.Assertions, assertion.AssertNoLeaks)
	}
	if len(sc.Faults) > 0 {
		sc.Assertions = append(sc.Assertions, assertion.AssertRecovery)
	}
}

// Embedded reports whether the harness starts the reference server itself.
func (sc *Scenario) Embedded() bool { return sc.Target.URL == "" }

// HasMetrics reports whether a metrics endpoint is known: target.metrics_url, or the
// embedded reference server's router. An external target (with or without
// target.launch) has one only when target.metrics_url names it.
func (sc *Scenario) HasMetrics() bool {
	if sc.Target.MetricsURL != "" || len(sc.Target.MetricsURLs) > 0 || sc.Embedded() {
		return true
	}
	for _, l := range sc.Target.Launch {
		if l.MetricsURL != "" {
			return true
		}
	}
	return false
}
