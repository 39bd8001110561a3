package reports

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// Compare defaults.
const (
	DefaultTolerance = 0.10
	DefaultAlpha     = 0.01
	// DefaultMinRateChange is the smallest absolute change of an outcome rate that can be
	// a regression, so that 0 → 2 rejections in 10,000 does not trip the z-test.
	DefaultMinRateChange = 0.01
	// DefaultMinTail is how many samples must lie beyond a percentile, on both sides,
	// for it to be gated: the bootstrap of an extreme quantile from a few tail samples is
	// degenerate (it resamples the same two or three values) and its interval far too
	// narrow. p99 needs 1,000 samples, p90 100, p50 20; below that a figure is shown,
	// not judged.
	DefaultMinTail = 10
	// DefaultMinLatencyChange is the smallest absolute change of a latency percentile
	// that can be a regression: below a few milliseconds, run-to-run differences are the
	// machine's scheduling (a sub-millisecond ITL tripled between two runs of smoke on a
	// busy CI host), which resampling one run cannot see.
	DefaultMinLatencyChange = 0.005
)

// CompareOptions say how strict compare is; zero fields take the defaults.
type CompareOptions struct {
	// Tolerance, when set, replaces every floor's Rel (the relative latency increase
	// allowed: a latency figure regresses only when its whole bootstrap interval lies
	// above it). Zero: the per-metric Floors.
	Tolerance     float64
	Alpha         float64
	MinRateChange float64
	MinTail       int
	// MinLatencyChange (seconds), when set, replaces every floor's Abs. Zero: Floors.
	MinLatencyChange float64
	Resamples        int
	Level            float64
	Seed             uint64
	// Floors are the per-metric floors ("ttft", "itl", "e2e"); nil: DefaultFloors.
	Floors map[string]Floor
	// Contention bounds a run's contention; above it the answer is inconclusive.
	Contention ContentionBounds
}

func (o *CompareOptions) defaults() {
	if o.Alpha <= 0 {
		o.Alpha = DefaultAlpha
	}
	if o.MinRateChange <= 0 {
		o.MinRateChange = DefaultMinRateChange
	}
	if o.MinTail <= 0 {
		o.MinTail = DefaultMinTail
	}
	if o.Resamples <= 0 {
		o.Resamples = DefaultResamples
	}
	if o.Level <= 0 {
		o.Level = DefaultLevel
	}
	if o.Seed == 0 {
		o.Seed = bootstrapSeed
	}
	o.Floors = o.EffectiveFloors()
	o.Contention.defaults()
}

// Stat is the row's test result as shown: the interval of the change, the p-value, or
// why the figure is not gated.
func (r Row) Stat() string {
	switch {
	case r.CI != nil:
		return fmt.Sprintf("[%+.1f%%, %+.1f%%]", 100*r.CI.Lo, 100*r.CI.Hi)
	case r.P != nil:
		return fmt.Sprintf("p = %.2g", *r.P)
	case strings.HasPrefix(r.Why, "not gated"):
		return "too few samples"
	}
	return ""
}

// Row is one figure side by side. CI is the bootstrap interval of the relative change
// (latency rows); P the z-test's p-value (outcome rate rows).
type Row struct {
	Group      string    `json:"group"` // "run" or "workload NAME"
	Figure     string    `json:"figure"`
	Base       float64   `json:"base"`
	New        float64   `json:"new"`
	Unit       string    `json:"unit,omitempty"`
	CI         *Interval `json:"ci,omitempty"`
	P          *float64  `json:"p,omitempty"`
	Regression bool      `json:"regression"`
	Why        string    `json:"why,omitempty"`
	// Spread is the lowest and highest value of the figure among several BASE runs
	// (a pooled baseline); nil for one.
	Spread *Interval `json:"base_spread,omitempty"`
}

// Change is New - Base, relative to Base when Base is not 0.
func (r Row) Change() string {
	if r.Unit == "s" && (r.Base < 0 || r.New < 0) { // a fault that never recovered
		if r.Base == r.New {
			return "="
		}
		return "-"
	}
	d := r.New - r.Base
	if r.Base == 0 {
		if d == 0 {
			return "="
		}
		return fmt.Sprintf("%+.4g", d)
	}
	return fmt.Sprintf("%+.1f%%", 100*d/r.Base)
}

// Comparison is compare's answer.
type Comparison struct {
	Base, New  *Results
	BaseDigest string
	NewDigest  string
	Forced     bool // digests differ and the user compared anyway
	// BaseReport and NewReport are each run's report.html relative to the compare
	// outputs, when it exists ("" otherwise).
	BaseReport, NewReport string
	Options               CompareOptions
	Rows                  []Row
	Regressions           []string
	// Bases is how many BASE runs were pooled (0 or 1: one).
	Bases int
	// Differences say how the runs' provenance differs (sim vs real, backend, profile,
	// server version, target.launch): set by the caller, which refuses such a pair
	// unless forced.
	Differences []string
	// Contended names each run whose contention exceeded a bound and by how much: the
	// answer is then inconclusive, never a regression.
	Contended []string
	// Invalid names each run whose verdict was invalid (interrupted, its target or the
	// harness failed) and why: its figures cannot be trusted, so the answer is
	// inconclusive too, never a regression; --ignore-contention does not lift it.
	Invalid  []string
	baseRuns []*Run
}

// Comparable says whether the two runs ran the same scenario.
func (c *Comparison) Comparable() bool { return c.BaseDigest == c.NewDigest }

// Regressed reports whether any row or rule flagged a regression and the runs were
// quiet enough to say so (not Inconclusive).
func (c *Comparison) Regressed() bool { return len(c.Regressions) > 0 && !c.Inconclusive() }

// Inconclusive reports whether a run was too contended, or invalid, to judge the server by.
func (c *Comparison) Inconclusive() bool { return len(c.Contended) > 0 || len(c.Invalid) > 0 }

// NotJudged says why the answer is inconclusive: the invalid runs, then the contended.
func (c *Comparison) NotJudged() []string {
	return append(append([]string(nil), c.Invalid...), c.Contended...)
}

// InconclusiveCause is the short reason ("a run was contended", "a run was invalid").
func (c *Comparison) InconclusiveCause() string {
	switch {
	case len(c.Invalid) > 0 && len(c.Contended) > 0:
		return "a run was invalid, a run was contended"
	case len(c.Invalid) > 0:
		return "a run was invalid"
	}
	return "a run was contended"
}

// Compare compares two runs. The digests are ScenarioDigest's of each run's scenario.
func Compare(base, new *Run, baseDigest, newDigest string, opts CompareOptions) *Comparison {
	opts.defaults()
	c := &Comparison{Base: base.Results, New: new.Results, BaseDigest: baseDigest, NewDigest: newDigest, Options: opts, baseRuns: []*Run{base}}
	c.compare(base, new)
	return c
}

func (c *Comparison) compare(base, new *Run) {
	b, n := base.Results, new.Results
	c.contended()
	c.invalid()

	if b.SilentDrops == 0 && n.SilentDrops > 0 {
		c.Regressions = append(c.Regressions, fmt.Sprintf("NEW has %s where BASE had none", format.Plural(n.SilentDrops, "silent drop")))
	}
	if b.Verdict == VerdictPass && n.Verdict != VerdictPass {
		c.Regressions = append(c.Regressions, fmt.Sprintf("verdict %s → %s", b.Verdict, n.Verdict))
	}
	c.add(Row{Group: "run", Figure: "requests", Base: float64(b.Requests), New: float64(n.Requests)})
	c.add(Row{Group: "run", Figure: "throughput", Base: b.Throughput, New: n.Throughput, Unit: "req/s"})
	c.add(Row{Group: "run", Figure: "silent drops", Base: float64(b.SilentDrops), New: float64(n.SilentDrops),
		Regression: b.SilentDrops == 0 && n.SilentDrops > 0, Why: "any silent drop in NEW where BASE had none"})
	c.rates("run", b.Outcomes, b.Requests, n.Outcomes, n.Requests)
	c.latency("run", base.Samples, new.Samples, b.TTFT, b.ITL, b.E2E, n.TTFT, n.ITL, n.E2E)
	c.faults(b.Faults, n.Faults)

	// One workload in both: its rows would repeat the run's.
	names := format.SortedKeys(mergeNames(b.ByWorkload, n.ByWorkload))
	if len(names) == 1 && len(b.ByWorkload) == 1 && len(n.ByWorkload) == 1 {
		names = nil
	}
	for _, name := range names {
		bw, nw := b.ByWorkload[name], n.ByWorkload[name]
		g := "workload " + name
		c.add(Row{Group: g, Figure: "requests", Base: float64(bw.Requests), New: float64(nw.Requests)})
		c.add(Row{Group: g, Figure: "silent drops", Base: float64(bw.SilentDrops), New: float64(nw.SilentDrops)})
		c.rates(g, bw.Outcomes, bw.Requests, nw.Outcomes, nw.Requests)
		c.latency(g, workloadSamples(base.Samples, name), workloadSamples(new.Samples, name), bw.TTFT, bw.ITL, bw.E2E, nw.TTFT, nw.ITL, nw.E2E)
	}
}

func (c *Comparison) add(r Row) {
	c.Rows = append(c.Rows, r)
	if r.Regression && r.Figure != "silent drops" { // silent drops are said once, above
		c.Regressions = append(c.Regressions, fmt.Sprintf("%s %s: %s → %s (%s; %s)", r.Group, r.Figure, format.Figure(r.Base, r.Unit), format.Figure(r.New, r.Unit), r.Change(), r.Why))
	}
}

func mergeNames(a, b map[string]WorkloadResult) map[string]WorkloadResult {
	m := map[string]WorkloadResult{}
	for k := range a {
		m[k] = WorkloadResult{}
	}
	for k := range b {
		m[k] = WorkloadResult{}
	}
	return m
}

func workloadSamples(s *Samples, name string) *Samples {
	if s == nil || s.Workloads[name] == nil {
		return &Samples{}
	}
	return s.Workloads[name]
}

// rates compares each outcome's rate. A rise of a bad outcome (or a fall of ok) is a
// regression when the z-test's p < Alpha and the rate moved by at least MinRateChange.
func (c *Comparison) rates(group string, bo map[ledger.Outcome]int, bn int, no map[ledger.Outcome]int, nn int) {
	for _, o := range ledger.Outcomes {
		if bo[o] == 0 && no[o] == 0 && o != ledger.OutcomeOK {
			continue
		}
		br, nr := rate(bo[o], bn), rate(no[o], nn)
		_, p := TwoProportionZ(bo[o], bn, no[o], nn)
		worse := nr > br
		if o == ledger.OutcomeOK {
			worse = nr < br
		}
		row := Row{Group: group, Figure: "rate " + string(o), Base: br, New: nr, P: Float(roundP(p))}
		if worse && p < c.Options.Alpha && abs(nr-br) >= c.Options.MinRateChange {
			row.Regression = true
			row.Why = fmt.Sprintf("two-proportion z-test p = %.2g < %g", p, c.Options.Alpha)
		}
		c.add(row)
	}
}

func roundP(p float64) float64 { return float64(int64(p*1e6+0.5)) / 1e6 }

func rate(x, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(x) / float64(n)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// latency compares p50, p90 and p99 of TTFT, ITL and e2e; a figure regresses when the
// bootstrap interval of its relative change lies entirely above the tolerance.
func (c *Comparison) latency(group string, bs, ns *Samples, bt, bi, be, nt, ni, ne Percentiles) {
	if bs == nil {
		bs = &Samples{}
	}
	if ns == nil {
		ns = &Samples{}
	}
	o := c.Options
	for _, m := range []latencyMetric{
		ttftOrE2E("ttft", bs.TTFT, bs.TTFTSessions, ns.TTFT, ns.TTFTSessions, bt, nt),
		{"itl", bs.ITL, ns.ITL, bi, ni, bs.ITLEnds, ns.ITLEnds},
		ttftOrE2E("e2e", bs.E2E, bs.E2ESessions, ns.E2E, ns.E2ESessions, be, ne)} {
		floor := o.Floors[m.name]
		qs := []struct {
			name   string
			q      float64
			bv, nv float64
		}{{"p50", 0.5, m.bp.P50, m.np.P50}, {"p90", 0.9, m.bp.P90, m.np.P90}, {"p99", 0.99, m.bp.P99, m.np.P99}}
		cis, oks := BootstrapRelDiffsGrouped(m.bx, m.be, m.nx, m.ne, []float64{0.5, 0.9, 0.99}, o.Resamples, o.Level, o.Seed)
		for i, q := range qs {
			row := Row{Group: group, Figure: q.name + "(" + m.name + ")", Base: q.bv, New: q.nv, Unit: "s", Spread: c.baseSpread(group, m.name, q.q)}
			// The epsilon: 1 - 0.9 is a hair under 0.1, and 100 samples have 10 beyond p90.
			if tail := float64(min(len(m.bx), len(m.nx))) * (1 - q.q); tail < float64(o.MinTail)-1e-9 {
				if len(m.bx) > 0 && len(m.nx) > 0 {
					row.Why = fmt.Sprintf("not gated: fewer than %d samples beyond %s", o.MinTail, q.name)
				}
				c.add(row)
				continue
			}
			if oks[i] {
				ci := Interval{Lo: round(cis[i].Lo), Hi: round(cis[i].Hi)}
				row.CI = &ci
				if rel := floor.For(q.q); ci.Lo > rel && q.nv-q.bv >= floor.Abs {
					row.Regression = true
					row.Why = fmt.Sprintf("%g%% interval of the change [%+.1f%%, %+.1f%%] lies above +%g%% and it grew by ≥ %s", 100*o.Level, 100*ci.Lo, 100*ci.Hi, 100*rel, format.SecondsMicro(floor.Abs))
				}
			}
			c.add(row)
		}
	}
}

// faults compares time to recover per fault, matched by name. A fault that recovered in
// BASE and, measured, did not in NEW is a regression; the time itself is one number per fault, too
// noisy to gate on, so it is shown, not judged.
func (c *Comparison) faults(bf, nf []FaultResult) {
	idx := map[string]FaultResult{}
	for _, f := range bf {
		idx[f.Name] = f
	}
	for _, f := range nf {
		b, ok := idx[f.Name]
		if !ok {
			continue
		}
		row := Row{Group: "run", Figure: "time to recover " + f.Name, Unit: "s", Base: optFloat(b.TimeToRecover), New: optFloat(f.TimeToRecover)}
		switch {
		case b.Recovered != nil && *b.Recovered && f.Recovered == nil:
			// No request after it stopped (a shorter run): not measured, not a failure.
			row.Why = "not measured in NEW (no request after it stopped)"
		case b.Recovered != nil && *b.Recovered && !*f.Recovered:
			row.Regression = true
			row.Why = "recovered in BASE, not in NEW"
		}
		c.add(row)
	}
}

func optFloat(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// ScenarioDigest identifies a scenario for compare and trend: the SHA-256 (first 16 hex
// digits) of the resolved scenario (scenario.json) with the fields that may differ
// between runs of the same test left out — seed, duration, description, the target and
// the reference server's configuration (what is under test, not the test) — in a
// canonical JSON form (sorted keys). The workloads, deadlines, drain, recovery,
// self-check, assertions and the expanded faults remain.
func ScenarioDigest(scenarioJSON []byte) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(scenarioJSON, &m); err != nil {
		return "", fmt.Errorf("reports: scenario digest: %w", err)
	}
	for _, k := range []string{"seed", "duration", "description", "target", "reference"} {
		delete(m, k)
	}
	canon, err := json.Marshal(m) // maps marshal with sorted keys
	if err != nil {
		return "", fmt.Errorf("reports: scenario digest: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:8]), nil
}

// VerdictText is the comparison's one line.
func (c *Comparison) VerdictText() string {
	switch {
	case c.Inconclusive():
		s := "INCONCLUSIVE: " + strings.Join(c.NotJudged(), "; ")
		if len(c.Regressions) > 0 {
			s += fmt.Sprintf(" (%s not judged)", format.Plural(len(c.Regressions), "would-be regression"))
		}
		return s
	case c.Regressed():
		return fmt.Sprintf("REGRESSION: %s", format.Plural(len(c.Regressions), "regression"))
	}
	return "no regression"
}
