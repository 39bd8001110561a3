package explore

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
	"pdsoak/scenarios"
)

// shrinker reduces one failing run's parameters greedily, delta-debugging style: each
// candidate is one reduction of the current parameters, run again and kept only when
// it fails with the same signature. The seed never changes.
type shrinker struct {
	s     *searcher
	ctx   context.Context
	sig   string
	cur   Params
	last  [32]byte // ledger hash of the run that last confirmed cur
	steps []string
	runs  int
}

// maxPasses bounds the rounds of reductions: each round after the first only retries
// what an earlier reduction may have unlocked.
const maxPasses = 4

func (k *shrinker) exhausted() bool {
	return k.runs >= k.s.opts.MaxShrinkRuns || k.ctx.Err() != nil
}

// try runs p and makes it current when it fails the same way.
func (k *shrinker) try(p Params) bool {
	if k.exhausted() {
		return false
	}
	k.runs++
	r := k.s.runOne(k.ctx, -1, p)
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
	if r.Signature != k.sig {
		return false
	}
	k.cur, k.last = p, r.Ledger
	return true
}

func (k *shrinker) run() {
	for range maxPasses {
		before := len(k.steps)
		k.dropFaults()
		k.dropWorkloads()
		k.dropFlags()
		k.lowerLoad()
		k.moveFlags()
		k.shortenFaults()
		k.shortenDuration()
		if len(k.steps) == before || k.exhausted() {
			return
		}
	}
}

func (k *shrinker) step(format string, args ...any) {
	k.steps = append(k.steps, fmt.Sprintf(format, args...))
}

func (k *shrinker) dropFaults() {
	for j := len(k.cur.Faults) - 1; j >= 0 && j < len(k.cur.Faults); j-- {
		f := k.cur.Faults[j]
		p := k.cur.clone()
		p.Faults = slices.Delete(p.Faults, j, j+1)
		if k.try(p) {
			k.step("dropped fault %s (%s on %s at %s for %s)", f.Name, f.Type, f.Target, f.At, f.For)
		}
	}
}

func (k *shrinker) dropWorkloads() {
	for j := range k.cur.Workloads {
		kept := 0
		for _, w := range k.cur.Workloads {
			if !w.Dropped {
				kept++
			}
		}
		if kept < 2 || k.cur.Workloads[j].Dropped {
			continue
		}
		p := k.cur.clone()
		p.Workloads[j].Dropped = true
		if k.try(p) {
			k.step("dropped workload %s", p.Workloads[j].Name)
		}
	}
}

func (k *shrinker) dropFlags() {
	for j := len(k.cur.Flags) - 1; j >= 0 && j < len(k.cur.Flags); j-- {
		f := k.cur.Flags[j]
		p := k.cur.clone()
		p.Flags = slices.Delete(p.Flags, j, j+1)
		if k.try(p) {
			k.step("dropped %s %s (back to the scenario's own value)", f.List, f.Arg())
		}
	}
}

// lowerLoad lowers every agents workload's agents and turns, and every open_loop
// workload's rate, to the least that still fails.
func (k *shrinker) lowerLoad() {
	ex := k.s.space.ex
	bound := func(r []int, def int) int {
		if len(r) == 2 {
			return r[0]
		}
		return def
	}
	for j, w := range k.s.space.base.Workloads {
		if k.cur.Workloads[j].Dropped {
			continue
		}
		switch w.Type {
		case scenarios.WorkloadAgents:
			var agentsLo, turnsLo int
			if ex != nil {
				agentsLo, turnsLo = bound(ex.Agents, 1), bound(ex.Turns, 1)
			} else {
				agentsLo, turnsLo = 1, 1
			}
			k.lowerInt(fmt.Sprintf("agents of %s", w.Name), k.cur.Workloads[j].Agents, agentsLo, func(p *Params, v int) { p.Workloads[j].Agents = v })
			if t := k.cur.Workloads[j].Turns; t > 0 {
				k.lowerInt(fmt.Sprintf("turns of %s", w.Name), t, turnsLo, func(p *Params, v int) { p.Workloads[j].Turns = v })
			}
		case scenarios.WorkloadOpenLoop:
			if ex != nil && len(ex.Rate) == 2 && k.cur.Workloads[j].Rate > ex.Rate[0] {
				from := k.cur.Workloads[j].Rate
				v := k.bisect(from, ex.Rate[0], false, func(p *Params, v float64) { p.Workloads[j].Rate = v })
				if v != from {
					k.step("rate of %s: %g -> %g", w.Name, from, v)
				}
			}
		}
	}
}

func (k *shrinker) lowerInt(what string, from, to int, set func(*Params, int)) {
	if from <= to {
		return
	}
	v := k.bisect(float64(from), float64(to), true, func(p *Params, v float64) { set(p, int(v)) })
	if int(v) != from {
		k.step("%s: %d -> %d", what, from, int(v))
	}
}

// moveFlags moves every flag still set toward the scenario's own value of it, or
// toward the range's high bound when the scenario does not set it (limits and pool
// sizes are easier when larger), stopping at the last value that still fails.
func (k *shrinker) moveFlags() {
	for j := range k.cur.Flags {
		f := k.cur.Flags[j]
		target, ok := k.originalFlag(f)
		if !ok {
			target = k.s.space.ex.Flags[f.List][f.Name][1]
		}
		if target == f.Value {
			continue
		}
		v := k.bisect(f.Value, target, f.Integer, func(p *Params, v float64) { p.Flags[j].Value = v })
		if v != f.Value {
			k.step("%s %s -> %s", f.List, f.Arg(), FlagValue{Name: f.Name, Value: v, Integer: f.Integer}.Arg())
		}
	}
}

// originalFlag is the scenario's own numeric value of a flag, in the list explored.
func (k *shrinker) originalFlag(f FlagValue) (float64, bool) {
	ref := k.s.space.base.Reference
	s, ok := flagValue(*ref.ArgList(f.List), f.Name)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	if f.Integer {
		v = math.Round(v)
	}
	return v, true
}

func (k *shrinker) shortenFaults() {
	for j := range k.cur.Faults {
		f := k.cur.Faults[j]
		if f.For <= timeStep {
			continue
		}
		v := k.bisect(float64(f.For/timeStep), 1, true, func(p *Params, v float64) { p.Faults[j].For = scenarios.Duration(v) * timeStep })
		if d := scenarios.Duration(v) * timeStep; d != f.For {
			k.step("fault %s window: %s -> %s", f.Name, f.For, d)
		}
	}
}

// shortenDuration shortens the load to the least that still fails, keeping every
// fault window and every workload's start inside it.
func (k *shrinker) shortenDuration() {
	least := timeStep
	for _, f := range k.cur.Faults {
		least = max(least, f.At+max(f.For, timeStep))
	}
	for j, w := range k.s.space.base.Workloads {
		if !k.cur.Workloads[j].Dropped {
			least = max(least, w.Start+timeStep)
		}
	}
	from := k.cur.Duration
	if from <= least {
		return
	}
	units := float64((least + timeStep - 1) / timeStep)
	v := k.bisect(float64(from)/float64(timeStep), units, true, func(p *Params, v float64) { p.Duration = scenarios.Duration(v) * timeStep })
	if d := scenarios.Duration(math.Round(v)) * timeStep; d != from {
		k.step("duration: %s -> %s", from, d)
	}
}

// bisect moves a value from (where the run fails) toward to: to itself if it still
// fails, else the failing value closest to it, by bisection. Integers step by one;
// other numbers stop after a dozen halvings, at four significant digits.
func (k *shrinker) bisect(from, to float64, integer bool, set func(*Params, float64)) float64 {
	cand := func(v float64) bool {
		p := k.cur.clone()
		set(&p, v)
		return k.try(p)
	}
	if from == to || cand(to) {
		if from == to {
			return from
		}
		return to
	}
	fail, pass := from, to
	for range 64 {
		if k.exhausted() {
			break
		}
		var mid float64
		if integer {
			if math.Abs(pass-fail) <= 1 {
				break
			}
			mid = math.Trunc(fail + (pass-fail)/2)
		} else {
			mid, _ = strconv.ParseFloat(strconv.FormatFloat(fail+(pass-fail)/2, 'g', 4, 64), 64)
			if mid == fail || mid == pass || math.Abs(pass-fail) <= 1e-4*math.Max(math.Abs(from), math.Abs(to)) {
				break
			}
		}
		if cand(mid) {
			fail = mid
		} else {
			pass = mid
		}
	}
	return fail
}

// shrink shrinks the first run of a signature, writes the minimal scenario and runs
// the written file once more, loaded with the strict loader, to show it reproduces.
func (s *searcher) shrink(ctx context.Context, sr *SignatureReport, first *RunResult) *Shrunk {
	k := &shrinker{s: s, ctx: ctx, sig: sr.Signature, cur: first.params.clone(), last: first.Ledger}
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "explore: shrinking %s (run %d)\n", sr.Signature, sr.FirstRun)
	}
	k.run()
	out := &Shrunk{Params: k.cur, Steps: k.steps, Runs: k.runs}
	if out.Steps == nil {
		out.Steps = []string{}
	}
	out.File = s.fileName(sr.Signature)
	path := filepath.Join(s.opts.OutDir, out.File)
	data, _, err := s.materialise(k.cur, s.header(sr, k))
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		out.Error = err.Error()
		return out
	}
	sc, err := scenarios.Load(path, scenarios.WithFaultTypes(s.opts.FaultTypes))
	if err != nil {
		out.Error = "the written file does not load: " + err.Error()
		return out
	}
	out.RunDir = strings.TrimSuffix(out.File, ".yaml")
	dir := filepath.Join(s.opts.OutDir, out.RunDir)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		out.Error = err.Error()
		return out
	}
	if err := s.opts.Run(ctx, sc, dir); err != nil {
		out.Error = "the rerun of the written file failed: " + err.Error()
		return out
	}
	cfg := s.opts.ReportConfig(sc)
	res, sum, err := judge(filepath.Join(dir, ledger.EventsFile), cfg)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Reproduced = Signature(res) == sr.Signature
	out.LedgerIdentical = sum == k.last
	// The run's own reports, as `harness run` would write them.
	if full, err := reports.ComputeFile(filepath.Join(dir, ledger.EventsFile), cfg); err == nil {
		_ = render.WriteAll(dir, full)
	}
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "explore: wrote %s (%d steps, %d runs, reproduced: %t)\n", path, len(out.Steps), out.Runs, out.Reproduced)
	}
	return out
}

// fileName is the signature's file name, made unique among this search's files.
func (s *searcher) fileName(sig string) string {
	name := FileName(sig)
	base := strings.TrimSuffix(name, ".yaml")
	for n := 2; s.used[name]; n++ {
		name = fmt.Sprintf("%s-%d.yaml", base, n)
	}
	if s.used == nil {
		s.used = map[string]bool{}
	}
	s.used[name] = true
	return name
}

// header is the shrunk file's comment: what it shows, how it was found, how it was
// shrunk and how to run it.
func (s *searcher) header(sr *SignatureReport, k *shrinker) []string {
	name := FileName(sr.Signature)
	cmd := s.opts.Command
	if cmd == "" {
		cmd = fmt.Sprintf("harness explore %s --seed %d", s.space.base.File, s.opts.Seed)
	}
	h := []string{
		fmt.Sprintf("%s: a minimal scenario that fails with %s.", name, sr.Signature),
		"",
		fmt.Sprintf("Found by `%s` (explore seed %d): run %d, scenario seed %d, the first of %d runs with this signature.",
			cmd, s.opts.Seed, sr.FirstRun, sr.Seed, sr.Count),
		fmt.Sprintf("Shrunk from %s in %d steps over %d runs (the seed kept):", s.space.base.File, len(k.steps), k.runs),
	}
	for _, st := range k.steps {
		h = append(h, "  - "+st)
	}
	h = append(h, "",
		"Reproduce: harness run --sim FILE (the same ledger, byte for byte); on the real reference server: harness run FILE.",
		"",
		fmt.Sprintf("Expected verdict: FAIL (exit 1) — %s", sr.Signature))
	return h
}
