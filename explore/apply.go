package explore

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"pdsoak/reports"
	"pdsoak/scenarios"
)

// Apply returns the scenario a run with parameters p runs: the space's scenario with
// p's seed, duration, load, flags and faults, no explore section and a fixed fault
// timeline (p's faults are concrete injections). What the scenario derived from its
// faults and did not set itself (proxies, fault injection, the default assertions) is
// derived again for p's faults.
func (s *Space) Apply(p Params) *scenarios.Scenario {
	base := s.base
	sc := &scenarios.Scenario{
		Name: base.Name, Description: base.Description, Seed: p.Seed, Duration: p.Duration,
		Target: base.Target, Reference: base.Reference, Deadlines: base.Deadlines, Drain: base.Drain,
		Recovery: base.Recovery, SelfCheck: base.SelfCheck, Forensics: base.Forensics,
	}
	for i, w := range base.Workloads {
		wp := p.Workloads[i]
		if wp.Dropped || w.Start >= p.Duration {
			continue
		}
		switch w.Type {
		case scenarios.WorkloadAgents:
			w.Agents, w.Turns = wp.Agents, wp.Turns
		case scenarios.WorkloadOpenLoop:
			if w.Pacer != nil {
				pc := *w.Pacer
				if pc.Rate > 0 && wp.Rate != pc.Rate {
					pc.Amplitude *= wp.Rate / pc.Rate // a sine's amplitude must stay within its rate
				}
				pc.Rate = wp.Rate
				w.Pacer = &pc
			}
		}
		end := p.Duration - w.Start
		if !base.IsSet(fmt.Sprintf("workloads[%d].duration", i)) || w.Duration > end {
			w.Duration = end
		}
		sc.Workloads = append(sc.Workloads, w)
	}
	ref := &sc.Reference
	for _, list := range scenarios.ExploreArgLists {
		l := ref.ArgList(list)
		*l = slices.Clone(*l)
	}
	for _, f := range p.Flags {
		l := ref.ArgList(f.List)
		*l = setFlag(*l, f.Name, formatNumber(f.Value, f.Integer))
	}
	sc.Faults = make([]scenarios.Fault, len(p.Faults))
	for i, f := range p.Faults {
		f.Params = maps.Clone(f.Params)
		sc.Faults[i] = f
	}
	topo := sc.Topology()
	if !base.IsSet("reference.proxies") && base.Target.URL == "" {
		ref.Proxies = false
		for _, f := range sc.Faults {
			if k, ok := topo.Resolve(f.Target); ok && k == scenarios.TargetLink {
				ref.Proxies = true
			}
		}
	}
	if !base.IsSet("reference.fault_injection") {
		ref.FaultInjection = len(sc.Faults) > 0
	}
	if base.IsSet("assertions") {
		sc.Assertions = slices.Clone(base.Assertions)
		if len(sc.Faults) == 0 {
			// recovery cannot be judged without a fault; validation would refuse it.
			sc.Assertions = slices.DeleteFunc(sc.Assertions, func(a string) bool {
				pa, err := reports.ParseAssertion(a)
				return err == nil && pa.Name == reports.AssertRecovery
			})
		}
	}
	return sc
}

// Render writes a scenario as YAML, header (comment lines, without "# ") first. Fields
// left empty are left out; everything else is written as it will run, so that loading
// the file gives this scenario back and no default of a later version changes it.
func Render(sc *scenarios.Scenario, header []string) ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(sc); err != nil {
		return nil, fmt.Errorf("explore: render %s: %w", sc.Name, err)
	}
	// The faults are concrete injections: a repeated timeline would repeat them again.
	deleteKey(&doc, "fault_timeline")
	deleteKey(&doc, "explore")
	if sc.Assertions == nil {
		deleteKey(&doc, "assertions") // derived from the faults when loaded
	}
	prune(&doc)
	var buf bytes.Buffer
	for _, h := range header {
		if h == "" {
			buf.WriteString("#\n")
			continue
		}
		buf.WriteString("# " + strings.ReplaceAll(h, "\n", " ") + "\n")
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("explore: render %s: %w", sc.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("explore: render %s: %w", sc.Name, err)
	}
	return buf.Bytes(), nil
}

func deleteKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// keepZero are the keys whose zero value differs from leaving them out (a default
// would replace it): seed 0, a colocated topology, no proxies or failpoints, a
// non-streaming workload, agents with turns 0 (until the window ends), an explicitly
// empty list of assertions.
var keepZero = map[string]bool{
	"seed": true, "reference.prefill": true, "reference.decode": true,
	"reference.proxies": true, "reference.fault_injection": true,
	"workloads[].stream": true, "assertions": true,
}

// prune removes zero values (0, false, "", 0s, null, empty lists and mappings) that
// mean the same as an absent key: many keys apply to one workload type only, and a
// zero written for another type would be refused by the strict loader.
func prune(m *yaml.Node) { pruneAt(m, "") }

func pruneAt(m *yaml.Node, path string) {
	switch m.Kind {
	case yaml.SequenceNode:
		for _, c := range m.Content {
			pruneAt(c, path+"[]")
		}
		return
	case yaml.MappingNode:
	default:
		return
	}
	agents := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "type" && m.Content[i+1].Value == scenarios.WorkloadAgents {
			agents = true
		}
	}
	out := m.Content[:0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		if k.Value != "params" { // a fault's params are the chaos package's: kept as written
			pruneAt(v, p)
		}
		keep := keepZero[p] || (agents && p == "workloads[].turns")
		if !keep && isZero(v) {
			continue
		}
		out = append(out, k, v)
	}
	m.Content = out
}

func isZero(v *yaml.Node) bool {
	switch v.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		return len(v.Content) == 0
	case yaml.ScalarNode:
		switch v.Tag {
		case "!!null":
			return true
		case "!!bool":
			return v.Value == "false"
		case "!!int", "!!float":
			return v.Value == "0"
		case "!!str":
			return v.Value == "" || v.Value == "0s"
		}
	}
	return false
}
