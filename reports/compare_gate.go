package reports

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"pdsoak/reports/internal/format"
)

// Floor is how much a latency percentile must grow before it can be a regression: the
// lower end of the bootstrap interval of its relative change must lie above Rel (p50)
// or Tail (p90, p99), and the percentile must have grown by at least Abs seconds. Rel
// scales with the metric; Tail is wider because a run's tail moves with the shape of its
// load (a burst, a session stuck behind a long context) far more than resampling one
// run can show; Abs keeps sub-millisecond figures (a CPU host's scheduling) from gating.
type Floor struct {
	Rel  float64 `json:"rel"`
	Tail float64 `json:"tail,omitempty"` // 0: Rel
	Abs  float64 `json:"abs"`
}

// For is the relative floor of quantile q.
func (f Floor) For(q float64) float64 {
	if q > 0.5 && f.Tail > 0 {
		return f.Tail
	}
	return f.Rel
}

// DefaultFloors are the per-metric floors, chosen by the gate calibration
// (docs/COMPARE.md, make gate-calibration): on 80 same-server pairs no p50 interval lay
// above +5%, while a tail's lay up to +30% (TTFT p90 of one pair), so the tails get
// floors of their own; each Abs is small enough that a 10% slower H100-class server
// (ITL about 7 ms, open-loop TTFT about 25 ms) still clears it.
var DefaultFloors = map[string]Floor{
	"ttft": {Rel: 0.05, Tail: 0.35, Abs: 0.002},
	"itl":  {Rel: 0.05, Tail: 0.10, Abs: 0.0005},
	"e2e":  {Rel: 0.05, Tail: 0.35, Abs: 0.005},
}

// EffectiveFloors are the floors (DefaultFloors when Floors is nil) with Tolerance and
// MinLatencyChange applied.
func (o CompareOptions) EffectiveFloors() map[string]Floor {
	src := o.Floors
	if src == nil {
		src = DefaultFloors
	}
	out := make(map[string]Floor, len(src))
	for k, f := range src {
		if o.Tolerance > 0 {
			f.Rel, f.Tail = o.Tolerance, o.Tolerance
		}
		if o.MinLatencyChange > 0 {
			f.Abs = o.MinLatencyChange
		}
		out[k] = f
	}
	for _, k := range []string{"ttft", "itl", "e2e"} {
		if _, ok := out[k]; !ok {
			out[k] = Floor{Rel: max(o.Tolerance, DefaultTolerance), Abs: max(o.MinLatencyChange, DefaultMinLatencyChange)}
		}
	}
	return out
}

// latencyMetric is one latency's samples on each side, grouped for the bootstrap.
type latencyMetric struct {
	name   string
	bx, nx []float64
	bp, np Percentiles
	be, ne []int
}

// ttftOrE2E groups TTFT or e2e samples by agent session (open-loop requests alone).
func ttftOrE2E(name string, bx []float64, bk []string, nx []float64, nk []string, bp, np Percentiles) latencyMetric {
	m := latencyMetric{name: name, bp: bp, np: np}
	m.bx, m.be = GroupBySession(bx, bk)
	m.nx, m.ne = GroupBySession(nx, nk)
	// The grouped bootstrap wants both sides grouped or neither; a side without
	// sessions is one group per sample.
	if m.be == nil && m.ne != nil {
		m.be = perSample(len(m.bx))
	}
	if m.ne == nil && m.be != nil {
		m.ne = perSample(len(m.nx))
	}
	return m
}

func perSample(n int) []int {
	ends := make([]int, n)
	for i := range ends {
		ends[i] = i + 1
	}
	return ends
}

// baseSpread is the lowest and highest q-percentile of metric among the BASE runs, when
// there are several.
func (c *Comparison) baseSpread(group, metric string, q float64) *Interval {
	if len(c.baseRuns) < 2 {
		return nil
	}
	var lo, hi float64
	for i, r := range c.baseRuns {
		ps := figurePercentiles(r.Results, group, metric)
		v := map[float64]float64{0.5: ps.P50, 0.9: ps.P90, 0.99: ps.P99}[q]
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return &Interval{Lo: lo, Hi: hi}
}

func figurePercentiles(r *Results, group, metric string) Percentiles {
	ttft, itl, e2e := r.TTFT, r.ITL, r.E2E
	if name, ok := strings.CutPrefix(group, "workload "); ok {
		w := r.ByWorkload[name]
		ttft, itl, e2e = w.TTFT, w.ITL, w.E2E
	}
	switch metric {
	case "ttft":
		return ttft
	case "itl":
		return itl
	}
	return e2e
}

// contended fills Contended from each run's contention.
func (c *Comparison) contended() {
	name := func(i int) string {
		if len(c.baseRuns) > 1 {
			return fmt.Sprintf("BASE %d of %d", i+1, len(c.baseRuns))
		}
		return "BASE"
	}
	for i, r := range c.baseRuns {
		if ex := r.Results.Contention.Exceeded(c.Options.Contention); len(ex) > 0 {
			c.Contended = append(c.Contended, name(i)+" was contended: "+strings.Join(ex, ", "))
		}
	}
	if ex := c.New.Contention.Exceeded(c.Options.Contention); len(ex) > 0 {
		c.Contended = append(c.Contended, "NEW was contended: "+strings.Join(ex, ", "))
	}
}

// invalid fills Invalid from each run's verdict: an invalid run (interrupted, or its
// target or the harness failed) is not whole, so comparing its figures, or its verdict,
// says nothing about the server.
func (c *Comparison) invalid() {
	why := func(r *Results) string {
		if len(r.InvalidReasons) == 0 {
			return "invalid"
		}
		return "invalid (" + strings.Join(r.InvalidReasons, "; ") + ")"
	}
	for i, r := range c.baseRuns {
		if r.Results.Verdict == VerdictInvalid {
			name := "BASE"
			if len(c.baseRuns) > 1 {
				name = fmt.Sprintf("BASE %d of %d", i+1, len(c.baseRuns))
			}
			c.Invalid = append(c.Invalid, name+" was "+why(r.Results))
		}
	}
	if c.New.Verdict == VerdictInvalid {
		c.Invalid = append(c.Invalid, "NEW was "+why(c.New))
	}
}

// CompareRuns compares NEW with one or more BASE runs of the same scenario (a nightly's
// "last N good nights"): the BASE runs are pooled (PoolRuns) and NEW is compared with
// their pooled distribution; each latency row reports the spread of the BASE runs' own
// percentiles; any run's contention above opts.Contention makes the answer
// inconclusive. digest is the scenarios' common digest (ScenarioDigest).
func CompareRuns(bases []*Run, new *Run, digest string, opts CompareOptions) (*Comparison, error) {
	pooled, err := PoolRuns(bases)
	if err != nil {
		return nil, err
	}
	opts.defaults()
	c := &Comparison{Base: pooled.Results, New: new.Results, BaseDigest: digest, NewDigest: digest, Options: opts,
		baseRuns: bases, Bases: len(bases)}
	c.compare(pooled, new)
	return c, nil
}

// Identity is what a run was made against, from its results and scenario.json: runs
// whose identities differ measure different things, and compare refuses them.
type Identity struct {
	Mode          string `json:"mode,omitempty"`           // "sim" or "real"
	Backend       string `json:"backend,omitempty"`        // the reference server's backend, or "external", or "launched"
	Profile       string `json:"profile,omitempty"`        // the reference server's simtime/paced profile
	ServerVersion string `json:"server_version,omitempty"` // what the target said (target event)
	Launch        string `json:"launch,omitempty"`         // the target.launch command lines
}

// IdentityOf reads a run's identity from its results and resolved scenario.json.
func IdentityOf(r *Results, scenarioJSON []byte) (Identity, error) {
	var sc struct {
		Target struct {
			URL    string `json:"url"`
			Launch []struct {
				Name      string   `json:"name"`
				Launcher  string   `json:"launcher"`
				Command   []string `json:"command"`
				ExtraArgs string   `json:"extra_args"`
			} `json:"launch"`
		} `json:"target"`
		Reference struct {
			Backend string `json:"backend"`
			Profile string `json:"profile"`
		} `json:"reference"`
	}
	if err := json.Unmarshal(scenarioJSON, &sc); err != nil {
		return Identity{}, fmt.Errorf("reports: identity: %w", err)
	}
	id := Identity{Mode: "real"}
	if r.Mode != "" {
		id.Mode = r.Mode
	}
	if r.Provenance != nil {
		id.ServerVersion = r.Provenance.ServerVersion
	}
	switch {
	case len(sc.Target.Launch) > 0:
		id.Backend = "launched"
		var cmds []string
		for _, l := range sc.Target.Launch {
			cmds = append(cmds, strings.TrimSpace(l.Name+": "+strings.Join(append(append(strings.Fields(l.Launcher), l.Command...), strings.Fields(l.ExtraArgs)...), " ")))
		}
		sort.Strings(cmds)
		id.Launch = strings.Join(cmds, "; ")
	case sc.Target.URL != "":
		id.Backend = "external"
	default:
		id.Backend, id.Profile = sc.Reference.Backend, sc.Reference.Profile
		if id.Backend == "" {
			id.Backend = "tinyref"
		}
	}
	return id, nil
}

// IdentityChange is one field in which two identities differ.
type IdentityChange struct {
	What, From, To string // "mode", "backend", "profile", "server version", "target.launch"
}

// Changes lists, field by field, how b differs from a; launches that differ only in
// their ports do not (MaskPorts). Compare's Differences and the trend page's change
// marks both read it.
func (a Identity) Changes(b Identity) []IdentityChange {
	var out []IdentityChange
	for _, f := range []IdentityChange{
		{"mode", a.Mode, b.Mode}, {"backend", a.Backend, b.Backend}, {"profile", a.Profile, b.Profile},
		{"server version", a.ServerVersion, b.ServerVersion}, {"target.launch", a.Launch, b.Launch},
	} {
		if f.From != f.To && (f.What != "target.launch" || MaskPorts(f.From) != MaskPorts(f.To)) {
			out = append(out, f)
		}
	}
	return out
}

// Differences says how two identities differ (none: comparable), one sentence a change.
func (a Identity) Differences(b Identity) []string {
	var out []string
	for _, c := range a.Changes(b) {
		if c.What == "mode" {
			out = append(out, fmt.Sprintf("%s run vs %s run (a simulated run is not a measurement of a real one)", c.From, c.To))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s vs %s", c.What, format.OrNone(c.From), format.OrNone(c.To)))
	}
	return out
}

// Ports a launched target's processes listen on differ from run to run (harness nightly
// --reference and the launcher take free ports) without changing what is measured: two
// launches that differ only in their ports are the same target (compare, the nightly's
// pooling and the trend page's change marks all judge them so).
var (
	portFlagRE = regexp.MustCompile(`(--[A-Za-z0-9-]*port[A-Za-z0-9-]*[= ])[0-9]+`)
	hostPortRE = regexp.MustCompile(`((?:[0-9]{1,3}\.){3}[0-9]{1,3}|localhost|\[[0-9a-fA-F:]+\]):[0-9]+`)
)

// MaskPorts is launch (Identity.Launch) with its port numbers replaced by <port>: port
// flags (--port=N, --grpc-port N) and host:port addresses.
func MaskPorts(launch string) string {
	return hostPortRE.ReplaceAllString(portFlagRE.ReplaceAllString(launch, "${1}<port>"), "${1}:<port>")
}

// ContentionLines are each run's contention ("BASE contention: ..."), for compare.md and compare.html.
func (c *Comparison) ContentionLines() []string {
	var out []string
	for i, r := range c.baseRuns {
		if s := r.Results.Contention.Summary(); s != "" {
			label := "BASE"
			if len(c.baseRuns) > 1 {
				label = fmt.Sprintf("BASE %d", i+1)
			}
			out = append(out, label+" contention: "+s)
		}
	}
	if s := c.New.Contention.Summary(); s != "" {
		out = append(out, "NEW contention: "+s)
	}
	return out
}
