package scenarios

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// StepKind is the kind of a timeline step.
type StepKind string

// Timeline step kinds.
const (
	StepWorkloadStart StepKind = "workload_start"
	StepWorkloadStop  StepKind = "workload_stop"
	StepFaultStart    StepKind = "fault_start"
	StepFaultStop     StepKind = "fault_stop"
	StepLoadEnd       StepKind = "load_end"
	StepDrainEnd      StepKind = "drain_deadline"
)

// Step is one point on the timeline, relative to the start of load.
type Step struct {
	At     time.Duration
	Kind   StepKind
	Name   string // workload or fault name
	Detail string
}

// WorkloadWindow is when a workload runs and roughly how many requests it sends.
type WorkloadWindow struct {
	Name     string
	Type     string
	Start    time.Duration
	Stop     time.Duration
	Requests int  // expected request count (upper bound for agents)
	Open     bool // request count depends on the server (agents without a turn limit, or restarting)
}

// FaultWindow is when a fault is applied and reverted.
type FaultWindow struct {
	Name    string
	Type    string
	Target  string
	Members []string // concrete processes or links the target expands to
	Start   time.Duration
	Stop    time.Duration // the end of load when the fault has no `for`
	Params  map[string]any
}

// Timeline is the pure plan of a run, computed before anything starts.
type Timeline struct {
	Scenario  string
	Seed      int64
	Target    string // the URL, or "embedded reference (1 prefill + 1 decode, tinyref, strict)"
	Load      time.Duration
	Drain     time.Duration
	Workloads []WorkloadWindow
	Faults    []FaultWindow
	Steps     []Step // sorted by time, then start before stop
	Requests  int    // expected total
	// FaultCover describes a repeated or scaled fault timeline; empty when fixed.
	FaultCover string
	// Notes are things the reader of the plan should know (faults left out).
	Notes []string
	// Env is every ${VAR} the scenario used, as expanded.
	Env []EnvVar
	// Launch is the command line of every launched process, as expanded, and Links the
	// proxied links ("name: proxy -> upstream").
	Launch []string
	Links  []string
}

// Plan computes the timeline of a scenario (after ApplyDefaults). It is pure: it starts,
// reads and randomises nothing.
func Plan(sc *Scenario) Timeline {
	tl := Timeline{
		Scenario: sc.Name,
		Seed:     sc.Seed,
		Target:   describeTarget(sc),
		Env:      sc.Env,
		Load:     sc.Duration.D(),
		Drain:    sc.Drain.Timeout.D(),
	}
	for _, l := range sc.Target.Launch {
		argv, err := l.Argv()
		if err != nil {
			argv = l.Command
		}
		tl.Launch = append(tl.Launch, fmt.Sprintf("%s (%s): %s", l.Name, l.Role, shellJoin(argv)))
	}
	for _, k := range sc.Target.Links {
		tl.Links = append(tl.Links, fmt.Sprintf("%s -> %s", k.Name, k.Upstream))
	}
	for _, w := range sc.Workloads {
		start := w.Start.D()
		stop := start + w.Duration.D()
		if w.Duration == 0 || stop > tl.Load {
			stop = tl.Load
		}
		ww := WorkloadWindow{Name: w.Name, Type: w.Type, Start: start, Stop: stop}
		ww.Requests, ww.Open = expectedRequests(w, stop-start)
		if w.Type == WorkloadTrace {
			ww.Requests, ww.Open = sc.traceRequests(w, stop-start), false
		}
		tl.Requests += ww.Requests
		tl.Workloads = append(tl.Workloads, ww)
		tl.Steps = append(tl.Steps,
			Step{At: start, Kind: StepWorkloadStart, Name: w.Name, Detail: describeWorkload(w, ww)},
			Step{At: stop, Kind: StepWorkloadStop, Name: w.Name})
	}
	topo := sc.Topology()
	for _, f := range sc.Faults {
		start := f.At.D()
		stop := start + f.For.D()
		if f.For == 0 || stop > tl.Load {
			stop = tl.Load
		}
		fw := FaultWindow{Name: f.Name, Type: f.Type, Target: f.Target, Members: topo.Members(f.Target),
			Start: start, Stop: stop, Params: f.Params}
		tl.Faults = append(tl.Faults, fw)
		detail := fmt.Sprintf("%s on %s", f.Type, f.Target)
		if len(fw.Members) > 1 || (len(fw.Members) == 1 && fw.Members[0] != f.Target) {
			detail += " (" + strings.Join(fw.Members, ", ") + ")"
		}
		if p := formatParams(f.Params); p != "" {
			detail += " " + p
		}
		tl.Steps = append(tl.Steps,
			Step{At: start, Kind: StepFaultStart, Name: f.Name, Detail: detail},
			Step{At: stop, Kind: StepFaultStop, Name: f.Name, Detail: "revert"})
	}
	tl.FaultCover, tl.Notes = describeFaultTimeline(sc)
	tl.Steps = append(tl.Steps,
		Step{At: tl.Load, Kind: StepLoadEnd, Detail: "stop sending; drain in-flight requests"},
		Step{At: tl.Load + tl.Drain, Kind: StepDrainEnd, Detail: "anything unresolved is a silent drop; leak check"})
	order := map[StepKind]int{StepFaultStop: 0, StepWorkloadStop: 1, StepLoadEnd: 2, StepWorkloadStart: 3, StepFaultStart: 4, StepDrainEnd: 5}
	sort.SliceStable(tl.Steps, func(i, j int) bool {
		a, b := tl.Steps[i], tl.Steps[j]
		if a.At != b.At {
			return a.At < b.At
		}
		return order[a.Kind] < order[b.Kind]
	})
	return tl
}

// describeFaultTimeline says how a repeated or scaled fault list covers the duration,
// and which faults it leaves out.
func describeFaultTimeline(sc *Scenario) (string, []string) {
	ft := sc.FaultTimeline
	spec := sc.specFaults()
	if ft.mode() == CoverFixed || len(spec) == 0 {
		return "", nil
	}
	period := ft.period(spec)
	cover := fmt.Sprintf("%s repeated every %s: %s", plural(len(spec), "fault"), period, plural(len(sc.Faults), "injection"))
	if ft.mode() == CoverScale {
		cover = fmt.Sprintf("%s scaled ×%.3g from a %s cycle to the %s load", plural(len(spec), "fault"),
			float64(sc.Duration)/float64(period), period, sc.Duration)
	}
	var notes []string
	if out := sc.FaultsLeftOut(); len(out) > 0 {
		pronoun := "they do"
		if len(out) == 1 {
			pronoun = "it does"
		}
		notes = append(notes, fmt.Sprintf("%s left out: %s (%s not fit before the end of load at %s; one cycle is %s)",
			plural(len(out), "fault"), strings.Join(out, ", "), pronoun, sc.Duration, period))
	}
	return cover, notes
}

// plural formats a count and a noun: "1 turn", "4 turns", "2 retries".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func describeTarget(sc *Scenario) string {
	if sc.Target.URL != "" {
		if len(sc.Target.Launch) > 0 {
			names := make([]string, len(sc.Target.Launch))
			for i, l := range sc.Target.Launch {
				names[i] = l.Name
			}
			return fmt.Sprintf("%s (launched: %s)", sc.Target.URL, strings.Join(names, ", "))
		}
		return sc.Target.URL
	}
	r := sc.Reference
	if r.Prefill == 0 && r.Decode == 0 {
		return fmt.Sprintf("embedded reference (colocated, %s, %s)", r.Backend, r.Semantics)
	}
	return fmt.Sprintf("embedded reference (%d prefill + %d decode, %s, %s)", r.Prefill, r.Decode, r.Backend, r.Semantics)
}

// expectedRequests estimates how many requests a workload sends in its window.
func expectedRequests(w Workload, window time.Duration) (int, bool) {
	secs := window.Seconds()
	switch w.Type {
	case WorkloadAgents:
		if w.Turns == 0 || w.Restart {
			return 0, true
		}
		return w.Agents * w.Turns, false
	case WorkloadBurst:
		return w.Count, false
	case WorkloadProbe:
		if w.Interval <= 0 {
			return 0, true
		}
		return w.Count * int(1+window/w.Interval.D()), false
	case WorkloadOpenLoop:
		if w.Pacer == nil {
			return 0, false
		}
		p := w.Pacer
		var n float64
		switch p.Type {
		case PacerLinear:
			n = p.Rate*secs + p.Slope*secs*secs/2
		case PacerSine:
			// The mean over whole periods is Rate; add the partial period's share.
			per := p.Period.Seconds()
			if per > 0 {
				n = p.Rate*secs + p.Amplitude*per/(2*math.Pi)*(1-math.Cos(2*math.Pi*secs/per))
			}
		default:
			n = p.Rate * secs
		}
		if n < 0 {
			n = 0
		}
		c := int(math.Round(n))
		if w.Count > 0 && c > w.Count {
			c = w.Count
		}
		return c, false
	}
	return 0, false
}

func describeWorkload(w Workload, ww WorkloadWindow) string {
	stream := "stream"
	if !w.Stream {
		stream = "no-stream"
	}
	var s string
	switch w.Type {
	case WorkloadAgents:
		turns := plural(w.Turns, "turn")
		if w.Turns == 0 {
			turns = "turns until the window ends"
		} else if w.Restart {
			turns += ", restarting until the window ends"
		}
		s = fmt.Sprintf("agents: %s × %s, tool result %dB", plural(w.Agents, "session"), turns, w.ToolResultBytes)
		if w.Retries > 0 {
			s += fmt.Sprintf(", up to %s per refused turn", plural(w.Retries, "retry"))
		}
	case WorkloadOpenLoop:
		if w.Pacer != nil {
			s = fmt.Sprintf("open_loop: %s pacer at %g req/s", w.Pacer.Type, w.Pacer.Rate)
			switch w.Pacer.Type {
			case PacerLinear:
				s += fmt.Sprintf(" %+g req/s²", w.Pacer.Slope)
			case PacerSine:
				s += fmt.Sprintf(" ± %g over %s", w.Pacer.Amplitude, w.Pacer.Period)
			}
		}
	case WorkloadBurst:
		s = fmt.Sprintf("burst: %s at once", plural(w.Count, "request"))
	case WorkloadProbe:
		s = fmt.Sprintf("probe: %s every %s, greedy", plural(w.Count, "prompt"), w.Interval)
	case WorkloadTrace:
		s = describeTrace(w)
	}
	maxTokens := fmt.Sprintf("max_tokens %d", w.MaxTokens)
	if w.Type == WorkloadTrace { // each request's own; w.MaxTokens is only the default
		maxTokens = "max_tokens from the trace"
		if w.Trace != nil && w.Trace.MaxTokens > 0 {
			maxTokens += fmt.Sprintf(" (at most %d)", w.Trace.MaxTokens)
		}
	}
	s += fmt.Sprintf(", %s %s, %s", w.Endpoint, stream, maxTokens)
	if !ww.Open {
		s += fmt.Sprintf(", ~%s", plural(ww.Requests, "request"))
	}
	return s
}

func formatParams(p map[string]any) string {
	if len(p) == 0 {
		return ""
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, p[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// Write prints the timeline as text: a header and one line per step.
func (tl Timeline) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario  %s\nseed      %d\ntarget    %s\nload      %s, then drain up to %s\n",
		tl.Scenario, tl.Seed, tl.Target, tl.Load, tl.Drain)
	open := ""
	for _, w := range tl.Workloads {
		if w.Open {
			open = ", plus agent sessions that keep taking turns until their window ends"
		}
	}
	fmt.Fprintf(&b, "requests  ~%d expected%s\n", tl.Requests, open)
	if tl.FaultCover != "" {
		fmt.Fprintf(&b, "faults    %s\n", tl.FaultCover)
	}
	for _, n := range tl.Notes {
		fmt.Fprintf(&b, "note      %s\n", n)
	}
	for _, e := range tl.Env {
		def := ""
		if e.Default {
			def = " (default)"
		}
		val := e.Value
		if e.Secret {
			val = Redacted
		}
		fmt.Fprintf(&b, "env       %s=%s%s\n", e.Name, val, def)
	}
	for _, l := range tl.Launch {
		fmt.Fprintf(&b, "launch    %s\n", l)
	}
	for _, l := range tl.Links {
		fmt.Fprintf(&b, "proxy     %s\n", l)
	}
	b.WriteByte('\n')
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tEVENT\tNAME\tDETAIL")
	for _, s := range tl.Steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", fmtOffset(s.At), s.Kind, s.Name, s.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtOffset(d time.Duration) string {
	return "+" + d.Round(time.Millisecond).String()
}

// shellJoin writes argv as a shell would need it, quoting words with spaces or quotes.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
