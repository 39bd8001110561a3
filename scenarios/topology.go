package scenarios

import (
	"fmt"
	"sort"
	"strings"
)

// TargetKind says what a fault target names. Fault types declare the kinds they accept.
type TargetKind uint8

// Target kinds.
const (
	TargetProcess  TargetKind = 1 << iota // a supervised process: router, prefill-0, decode-0, a launch name
	TargetLink                            // a proxied link: router->prefill-0, prefill-0->decode-0 (KV)
	TargetWorkload                        // a workload name, or "client" for all of them
	TargetAny      = TargetProcess | TargetLink | TargetWorkload
)

func (k TargetKind) String() string {
	var parts []string
	if k&TargetProcess != 0 {
		parts = append(parts, "process")
	}
	if k&TargetLink != 0 {
		parts = append(parts, "link")
	}
	if k&TargetWorkload != 0 {
		parts = append(parts, "workload")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// Process is one process of the target topology.
type Process struct {
	Name string // router, prefill-0, decode-1, or a target.launch name
	Role string // router, prefill, decode, colocated
}

// Link is one proxied TCP link of the embedded topology.
type Link struct {
	Name string // "router->prefill-0", "router->decode-0", "prefill-0->decode-0"
	From string
	To   string
	KV   bool // the prefill→decode KV transfer link
}

// Topology is what fault targets can name. For the embedded reference server it is the
// router, the prefill-i and decode-i workers, and the links router->prefill-i,
// router->decode-j and prefill-i->decode-j (KV). Role names ("prefill", "decode") and
// role links ("router->decode", "prefill->decode") address every member. With
// target.launch it is the launched processes (no links). Workload names and "client"
// are always targets.
type Topology struct {
	Processes []Process
	Links     []Link
	Workloads []string
}

// Topology returns the targets a fault may name in this scenario.
func (sc *Scenario) Topology() Topology {
	var t Topology
	switch {
	case len(sc.Target.Launch) > 0:
		for _, l := range sc.Target.Launch {
			t.Processes = append(t.Processes, Process{Name: l.Name, Role: l.Role})
		}
		for _, k := range sc.Target.Links {
			from, to, _ := strings.Cut(k.Name, "->")
			t.Links = append(t.Links, Link{Name: k.Name, From: from, To: to})
		}
	case sc.Target.URL != "":
		// External endpoint: only client-side faults.
	case sc.Reference.Prefill == 0 && sc.Reference.Decode == 0:
		t.Processes = append(t.Processes, Process{Name: "colocated", Role: "colocated"})
	default:
		t.Processes = append(t.Processes, Process{Name: "router", Role: "router"})
		for i := 0; i < sc.Reference.Prefill; i++ {
			t.Processes = append(t.Processes, Process{Name: fmt.Sprintf("prefill-%d", i), Role: "prefill"})
		}
		for j := 0; j < sc.Reference.Decode; j++ {
			t.Processes = append(t.Processes, Process{Name: fmt.Sprintf("decode-%d", j), Role: "decode"})
		}
		for i := 0; i < sc.Reference.Prefill; i++ {
			p := fmt.Sprintf("prefill-%d", i)
			t.Links = append(t.Links, Link{Name: "router->" + p, From: "router", To: p})
		}
		for j := 0; j < sc.Reference.Decode; j++ {
			d := fmt.Sprintf("decode-%d", j)
			t.Links = append(t.Links, Link{Name: "router->" + d, From: "router", To: d})
		}
		for i := 0; i < sc.Reference.Prefill; i++ {
			for j := 0; j < sc.Reference.Decode; j++ {
				p, d := fmt.Sprintf("prefill-%d", i), fmt.Sprintf("decode-%d", j)
				t.Links = append(t.Links, Link{Name: p + "->" + d, From: p, To: d, KV: true})
			}
		}
	}
	for _, w := range sc.Workloads {
		if w.Name != "" {
			t.Workloads = append(t.Workloads, w.Name)
		}
	}
	return t
}

// Resolve says what kind of target name is, and whether it exists.
func (t Topology) Resolve(name string) (TargetKind, bool) {
	if name == "" {
		return 0, false
	}
	if name == "client" {
		return TargetWorkload, true
	}
	for _, w := range t.Workloads {
		if w == name {
			return TargetWorkload, true
		}
	}
	for _, p := range t.Processes {
		if p.Name == name || p.Role == name {
			return TargetProcess, true
		}
	}
	if len(t.links(name)) > 0 {
		return TargetLink, true
	}
	return 0, false
}

// links are the names of the links name designates: the one it names exactly (a launch
// link may be called "bootstrap", without "->"), or those whose ends match "from->to".
func (t Topology) links(name string) []string {
	from, to, pair := strings.Cut(name, "->")
	var out []string
	for _, l := range t.Links {
		if l.Name == name || (pair && t.matches(l.From, from) && t.matches(l.To, to)) {
			out = append(out, l.Name)
		}
	}
	return out
}

// Members expands a target to the concrete processes or links it names.
func (t Topology) Members(name string) []string {
	var out []string
	for _, p := range t.Processes {
		if p.Name == name || p.Role == name {
			out = append(out, p.Name)
		}
	}
	out = append(out, t.links(name)...)
	if len(out) == 0 {
		if k, ok := t.Resolve(name); ok && k == TargetWorkload {
			out = append(out, name)
		}
	}
	return out
}

func (t Topology) matches(proc, name string) bool {
	if proc == name {
		return true
	}
	for _, p := range t.Processes {
		if p.Name == proc && p.Role == name {
			return true
		}
	}
	return false
}

// Names lists every target name of a kind, sorted, for error messages.
func (t Topology) Names(kind TargetKind) []string {
	var out []string
	if kind&TargetProcess != 0 {
		for _, p := range t.Processes {
			out = append(out, p.Name)
		}
	}
	if kind&TargetLink != 0 {
		for _, l := range t.Links {
			out = append(out, l.Name)
		}
	}
	if kind&TargetWorkload != 0 {
		out = append(out, "client")
		out = append(out, t.Workloads...)
	}
	sort.Strings(out)
	return out
}
