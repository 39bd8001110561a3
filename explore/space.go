package explore

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"pdsoak/scenarios"
)

// Params are one run's choices: everything in which a run differs from the scenario.
// Apply turns them into a scenario.
type Params struct {
	// Seed is the scenario seed of the run.
	Seed int64 `json:"seed"`
	// Duration is the load duration.
	Duration scenarios.Duration `json:"duration"`
	// Workloads has one entry per workload of the scenario, in its order.
	Workloads []WorkloadParams `json:"workloads"`
	// Flags are the server flags set, in explore.flags order (list, then name).
	Flags []FlagValue `json:"flags,omitempty"`
	// Faults is the fault schedule: concrete injections.
	Faults []scenarios.Fault `json:"faults"`
}

// WorkloadParams is one workload's load.
type WorkloadParams struct {
	Name string `json:"name"`
	// Dropped removes the workload (shrinking only).
	Dropped bool    `json:"dropped,omitempty"`
	Agents  int     `json:"agents,omitempty"`
	Turns   int     `json:"turns,omitempty"`
	Rate    float64 `json:"rate,omitempty"`
}

// FlagValue is one server flag set to a value in one argument list.
type FlagValue struct {
	List    string  `json:"list"` // args, prefill, decode or router
	Name    string  `json:"name"` // --max-total-tokens
	Value   float64 `json:"value"`
	Integer bool    `json:"integer,omitempty"`
}

// Arg is the flag as a command-line argument, --name=value.
func (f FlagValue) Arg() string { return f.Name + "=" + formatNumber(f.Value, f.Integer) }

func formatNumber(v float64, integer bool) string {
	if integer {
		return strconv.FormatInt(int64(math.Round(v)), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// clone copies p deeply enough that a shrink step never edits another candidate.
func (p Params) clone() Params {
	q := p
	q.Workloads = slices.Clone(p.Workloads)
	q.Flags = slices.Clone(p.Flags)
	q.Faults = slices.Clone(p.Faults)
	return q
}

// Space is the search space of one scenario: what Draw may vary, within which ranges.
type Space struct {
	base *scenarios.Scenario
	// ex is the explore section after defaults; nil: only the seed varies.
	ex   *scenarios.Explore
	pool []faultChoice
}

// faultChoice is a fault Draw may inject: a type, the targets it may hit, its params.
type faultChoice struct {
	Name    string
	Type    string
	Targets []string
	Params  map[string]any
}

// FaultFilter says whether a fault can run in a scenario (nil) or why not; the
// simulator's CanModel is one. Catalogue faults it refuses are never drawn.
type FaultFilter func(sc *scenarios.Scenario, f scenarios.Fault) error

// NewSpace builds the search space of a loaded scenario. faultTypes is the fault
// catalogue (the chaos registry, as scenario validation takes it); it is used with
// explore.faults: catalogue, each type with its default params on every target of a
// kind it accepts that filter (optional) does not refuse: a target kind says "process",
// not which role a fault needs.
func NewSpace(base *scenarios.Scenario, faultTypes map[string]scenarios.FaultType, filter FaultFilter) *Space {
	s := &Space{base: base, ex: base.Explore}
	if s.ex == nil {
		return s
	}
	switch s.ex.Faults {
	case scenarios.ExploreFaultsScenario, "":
		for _, f := range base.Faults {
			s.pool = append(s.pool, faultChoice{Name: f.Name, Type: f.Type, Targets: []string{f.Target}, Params: f.Params})
		}
	case scenarios.ExploreFaultsCatalogue:
		topo := base.Topology()
		for _, name := range slices.Sorted(maps.Keys(faultTypes)) {
			ft := faultTypes[name]
			kind := ft.Targets
			if kind == 0 {
				kind = scenarios.TargetAny
			}
			c := faultChoice{Name: name, Type: name}
			for _, target := range topo.Names(kind) {
				// A type that needs params (a failpoint's name) has no default to draw.
				f := scenarios.Fault{Name: name, Type: name, Target: target}
				if ft.Check != nil && ft.Check(f) != nil {
					continue
				}
				if filter != nil && filter(base, f) != nil {
					continue
				}
				c.Targets = append(c.Targets, target)
			}
			if len(c.Targets) > 0 {
				s.pool = append(s.pool, c)
			}
		}
	}
	return s
}

// FaultTypes lists the fault types Draw may inject, sorted.
func (s *Space) FaultTypes() []string {
	seen := map[string]bool{}
	for _, c := range s.pool {
		seen[c.Type] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Base returns the parameters of the scenario as written: its seed, load, no flag
// changes and its own faults.
func (s *Space) Base() Params {
	p := Params{Seed: s.base.Seed, Duration: s.base.Duration, Faults: slices.Clone(s.base.Faults)}
	for _, w := range s.base.Workloads {
		wp := WorkloadParams{Name: w.Name}
		switch w.Type {
		case scenarios.WorkloadAgents:
			wp.Agents, wp.Turns = w.Agents, w.Turns
		case scenarios.WorkloadOpenLoop:
			if w.Pacer != nil {
				wp.Rate = w.Pacer.Rate
			}
		}
		p.Workloads = append(p.Workloads, wp)
	}
	return p
}

// timeStep is the resolution of drawn and shrunk times: readable files, few distinct
// values.
const timeStep = scenarios.Duration(100 * time.Millisecond)

// Draw returns run i's parameters under the explore seed. They depend on (seed, i)
// only, so a search's runs are the same whatever its parallelism and wherever it stops.
func (s *Space) Draw(seed int64, i int) Params {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
	p := s.Base()
	p.Seed = 1 + rng.Int64N(1<<31-1)
	e := s.ex
	if e == nil {
		return p
	}
	if len(e.Duration) == 2 {
		p.Duration = drawDuration(rng, e.Duration[0], e.Duration[1])
	}
	for j, w := range s.base.Workloads {
		wp := &p.Workloads[j]
		switch w.Type {
		case scenarios.WorkloadAgents:
			if len(e.Agents) == 2 {
				wp.Agents = e.Agents[0] + rng.IntN(e.Agents[1]-e.Agents[0]+1)
			}
			if len(e.Turns) == 2 {
				wp.Turns = e.Turns[0] + rng.IntN(e.Turns[1]-e.Turns[0]+1)
			}
		case scenarios.WorkloadOpenLoop:
			if len(e.Rate) == 2 && w.Pacer != nil {
				wp.Rate = drawNumber(rng, e.Rate[0], e.Rate[1], false)
			}
		}
	}
	for _, list := range slices.Sorted(maps.Keys(e.Flags)) {
		for _, name := range slices.Sorted(maps.Keys(e.Flags[list])) {
			r := e.Flags[list][name]
			integer := scenarios.IsInteger(r)
			p.Flags = append(p.Flags, FlagValue{List: list, Name: name, Integer: integer, Value: drawNumber(rng, r[0], r[1], integer)})
		}
	}
	p.Faults = s.drawFaults(rng, p.Duration)
	return p
}

// drawFaults draws 0 to max_faults injections from the pool, each at a random time for
// a random window inside the load.
func (s *Space) drawFaults(rng *rand.Rand, d scenarios.Duration) []scenarios.Fault {
	e := s.ex
	if e.Faults == scenarios.ExploreFaultsNone || len(s.pool) == 0 || e.MaxFaults <= 0 || d <= timeStep {
		return []scenarios.Fault{}
	}
	lo, hi := timeStep, d-timeStep
	if len(e.FaultFor) == 2 {
		lo, hi = max(timeStep, e.FaultFor[0]), min(e.FaultFor[1], hi)
	}
	lo = min(lo, hi)
	n := rng.IntN(e.MaxFaults + 1)
	out := make([]scenarios.Fault, 0, n)
	for j := range n {
		c := s.pool[rng.IntN(len(s.pool))]
		target := c.Targets[rng.IntN(len(c.Targets))]
		dur := drawDuration(rng, lo, hi)
		at := drawDuration(rng, 0, d-dur)
		out = append(out, scenarios.Fault{
			Name: c.Name + "-x" + strconv.Itoa(j+1), Type: c.Type, Target: target,
			At: at, For: dur, Params: maps.Clone(c.Params),
		})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].At < out[b].At })
	return out
}

// drawDuration draws uniformly in [lo, hi] on the timeStep grid.
func drawDuration(rng *rand.Rand, lo, hi scenarios.Duration) scenarios.Duration {
	lo = (lo + timeStep - 1) / timeStep * timeStep
	if hi <= lo {
		return max(min(lo, hi), 0)
	}
	steps := int64((hi - lo) / timeStep)
	return lo + scenarios.Duration(rng.Int64N(steps+1))*timeStep
}

// drawNumber draws in [lo, hi]: log-uniformly when the range spans a factor of ten or
// more (so that [512, 65536] tries small pools as often as large ones), else uniformly.
// Integers are whole; other numbers keep four significant digits.
func drawNumber(rng *rand.Rand, lo, hi float64, integer bool) float64 {
	var v float64
	if lo > 0 && hi >= 10*lo {
		v = math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	} else {
		v = lo + rng.Float64()*(hi-lo)
	}
	if integer {
		v = math.Round(v)
	} else {
		v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	}
	return math.Min(math.Max(v, lo), hi)
}

// flagValue reads a flag's value in an argument list (--name=value or --name value).
func flagValue(args []string, name string) (string, bool) {
	val, found := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			val, found = v, true
		} else if a == name && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			val, found = args[i+1], true
			i++
		}
	}
	return val, found
}

// setFlag sets name to value in args: the first occurrence is replaced by
// --name=value and any later one removed; absent, it is added at the end.
func setFlag(args []string, name, value string) []string {
	out := make([]string, 0, len(args)+1)
	set := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == name || strings.HasPrefix(a, name+"=") {
			if a == name && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
			if !set {
				out = append(out, name+"="+value)
				set = true
			}
			continue
		}
		out = append(out, a)
	}
	if !set {
		out = append(out, name+"="+value)
	}
	return out
}
