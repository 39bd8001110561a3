package scenarios

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const exploreBase = `name: t
duration: 40s
workloads:
  - {name: agents, type: agents, agents: 30, turns: 5}
faults:
  - {name: kill, type: decode_crash, target: decode, at: 5s, for: 5s}
`

func TestExploreSectionValid(t *testing.T) {
	sc, err := Parse("e.yaml", []byte(exploreBase+`explore:
  duration: [10s, 60s]
  agents: [5, 40]
  turns: [2, 8]
  flags:
    decode:
      --max-total-tokens: [512, 65536]
      --mem-fraction-static: [0.5, 0.9]
    args: {--max-queued-requests: [1, 256]}
`))
	require.NoError(t, err)
	e := sc.Explore
	require.NotNil(t, e)
	assert.Equal(t, []Duration{Duration(10 * time.Second), Duration(60 * time.Second)}, e.Duration)
	assert.Equal(t, []int{5, 40}, e.Agents)
	assert.Equal(t, []float64{512, 65536}, e.Flags["decode"]["--max-total-tokens"])
	assert.True(t, IsInteger(e.Flags["decode"]["--max-total-tokens"]))
	assert.False(t, IsInteger(e.Flags["decode"]["--mem-fraction-static"]))
	// Defaults: the scenario's own faults, as many as it has, windows 1s .. half the
	// shortest duration.
	assert.Equal(t, ExploreFaultsScenario, e.Faults)
	assert.Equal(t, 1, e.MaxFaults)
	assert.Equal(t, []Duration{Duration(time.Second), Duration(5 * time.Second)}, e.FaultFor)
	assert.Equal(t, 14, sc.Line("explore.flags.decode.--mem-fraction-static"))
	assert.Contains(t, e.String(), "decode --max-total-tokens 512..65536")
}

func TestExploreDefaults(t *testing.T) {
	tests := []struct {
		name      string
		section   string
		wantMax   int
		wantFor   []Duration
		wantFault string
	}{
		{"catalogue", "explore: {faults: catalogue}\n", DefaultExploreCatalogueFaults, []Duration{Duration(time.Second), Duration(20 * time.Second)}, ExploreFaultsCatalogue},
		{"none", "explore: {faults: none}\n", 0, nil, ExploreFaultsNone},
		{"explicit max", "explore: {faults: catalogue, max_faults: 7, fault_for: [2s, 3s]}\n", 7, []Duration{Duration(2 * time.Second), Duration(3 * time.Second)}, ExploreFaultsCatalogue},
		{"empty section", "explore: {}\n", 1, []Duration{Duration(time.Second), Duration(20 * time.Second)}, ExploreFaultsScenario},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse("e.yaml", []byte(exploreBase+tc.section))
			require.NoError(t, err)
			assert.Equal(t, tc.wantFault, sc.Explore.Faults)
			assert.Equal(t, tc.wantMax, sc.Explore.MaxFaults)
			assert.Equal(t, tc.wantFor, sc.Explore.FaultFor)
			// Idempotent.
			sc.ApplyDefaults()
			assert.Equal(t, tc.wantMax, sc.Explore.MaxFaults)
		})
	}
}

func TestExploreSectionProblems(t *testing.T) {
	tests := []struct {
		name    string
		section string
		want    []string // prefixes of "file:line: path: msg"
	}{
		{"one bound", "explore:\n  agents: [5]\n", []string{"e.yaml:8: explore.agents: must be a range [low, high] (two values), got 1"}},
		{"reversed", "explore:\n  turns: [8, 2]\n", []string{"e.yaml:8: explore.turns: the low bound (8) must not exceed"}},
		{"agents zero", "explore:\n  agents: [0, 4]\n", []string{"e.yaml:8: explore.agents: the bounds must lie in [1, 10000]"}},
		{"not a list", "explore:\n  agents: 5\n", []string{"e.yaml:8: explore.agents: must be a list"}},
		{"not numbers", "explore:\n  flags: {decode: {--max-total-tokens: [a, b]}}\n", []string{"e.yaml:8: explore.flags.decode.--max-total-tokens[0]: must be a number", "e.yaml:8: explore.flags.decode.--max-total-tokens[1]: must be a number"}},
		{"unknown list", "explore:\n  flags:\n    decoder: {--x: [1, 2]}\n", []string{`e.yaml:9: explore.flags.decoder: must be args, prefill, decode or router, got "decoder" (did you mean "decode"?)`}},
		{"bad flag name", "explore:\n  flags:\n    decode:\n      max-total-tokens: [1, 2]\n", []string{`e.yaml:10: explore.flags.decode.max-total-tokens: must be a long flag name`}},
		{"flag with value", "explore:\n  flags:\n    decode:\n      --x=1: [1, 2]\n", []string{`e.yaml:10: explore.flags.decode.--x=1: must be a long flag name`}},
		{"empty list", "explore:\n  flags:\n    decode: {}\n", []string{"e.yaml:9: explore.flags.decode: names no flag"}},
		{"unknown key", "explore:\n  agnets: [1, 2]\n", []string{`e.yaml:8: explore.agnets: unknown field (did you mean "agents"?)`}},
		{"bad mode", "explore:\n  faults: all\n", []string{`e.yaml:8: explore.faults: must be scenario, catalogue or none, got "all"`}},
		{"max with none", "explore:\n  faults: none\n  max_faults: 2\n", []string{"e.yaml:9: explore.max_faults: applies only with faults: scenario or catalogue"}},
		{"too many faults", "explore:\n  max_faults: 1000\n", []string{"e.yaml:8: explore.max_faults: must be in [0, 100]"}},
		{"rate without open loop", "explore:\n  rate: [1, 5]\n", []string{"e.yaml:8: explore.rate: applies to open_loop workloads"}},
		{"rate zero", "explore:\n  rate: [0, 5]\n", []string{"e.yaml:8: explore.rate: the low bound must be > 0", "e.yaml:8: explore.rate: applies to open_loop"}},
		{"duration zero", "explore:\n  duration: [0s, 5s]\n", []string{"e.yaml:8: explore.duration: the low bound must be > 0"}},
		{"duration bad", "explore:\n  duration: [soon, 5s]\n", []string{`e.yaml:8: explore.duration[0]: invalid duration "soon"`}},
		{"fault window too long", "explore:\n  fault_for: [50s, 60s]\n", []string{"e.yaml:8: explore.fault_for: the low bound (50s) must be shorter than the shortest duration explored (40s)"}},
		{"not a mapping", "explore: [1, 2]\n", []string{"e.yaml:7: explore: must be a mapping"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("e.yaml", []byte(exploreBase+tc.section))
			requireProblems(t, err, tc.want...)
		})
	}
}

func TestExploreColocatedFlags(t *testing.T) {
	_, err := Parse("e.yaml", []byte(exploreBase+"reference: {prefill: 0, decode: 0}\nexplore:\n  flags: {decode: {--max-total-tokens: [1, 2]}}\n"))
	requireProblems(t, err, "e.yaml:6: faults[0].target", "e.yaml:9: explore.flags.decode: the topology is colocated")
}

func TestArgList(t *testing.T) {
	var r Reference
	for _, key := range ExploreArgLists {
		l := r.ArgList(key)
		require.NotNil(t, l, key)
		*l = append(*l, "--"+key)
	}
	assert.Equal(t, []string{"--args"}, r.Args)
	assert.Equal(t, []string{"--prefill"}, r.PrefillArgs)
	assert.Equal(t, []string{"--decode"}, r.DecodeArgs)
	assert.Equal(t, []string{"--router"}, r.RouterArgs)
	assert.Nil(t, r.ArgList("nope"))
}

// FuzzExploreSection decodes arbitrary explore sections: a section either yields located
// problems or a search space whose every range is ordered and within bounds.
func FuzzExploreSection(f *testing.F) {
	f.Add("agents: [5, 40]\nturns: [2, 8]\nflags: {decode: {--max-total-tokens: [512, 65536]}}\n")
	f.Add("faults: catalogue\nmax_faults: 4\nfault_for: [1s, 9s]\nduration: [10s, 30s]\n")
	f.Add("flags: {args: {--mem-fraction-static: [0.5, 0.9]}, router: {--max-retries: [0, 3]}}\n")
	f.Add("agents: [40, 5]\nrate: [1e309, 2]\n")
	f.Add("flags: {decode: {--x: [.nan, 1]}}\n")
	f.Add("duration: [-1s, 1h]\nfault_for: [0s, 0s]\n")
	f.Add("flags: &a {decode: {--x: [1, 2]}}\nfaults: *a\n")
	f.Fuzz(func(t *testing.T, section string) {
		var b strings.Builder
		b.WriteString(exploreBase + "explore:\n")
		for _, line := range strings.Split(section, "\n") {
			b.WriteString("  " + line + "\n")
		}
		sc, err := Parse("f.yaml", []byte(b.String()))
		if err != nil {
			require.NotEmpty(t, problemsOf(t, err))
			return
		}
		e := sc.Explore
		if e == nil {
			return
		}
		for _, r := range [][]int{e.Agents, e.Turns} {
			if len(r) > 0 {
				require.Len(t, r, 2)
				require.LessOrEqual(t, r[0], r[1])
				require.GreaterOrEqual(t, r[0], 1)
			}
		}
		if len(e.Duration) > 0 {
			require.Len(t, e.Duration, 2)
			require.Greater(t, e.Duration[0], Duration(0))
			require.LessOrEqual(t, e.Duration[0], e.Duration[1])
		}
		for _, flags := range e.Flags {
			for name, r := range flags {
				require.Regexp(t, flagNameRE, name)
				require.Len(t, r, 2)
				require.LessOrEqual(t, r[0], r[1])
			}
		}
		require.Contains(t, []string{ExploreFaultsScenario, ExploreFaultsCatalogue, ExploreFaultsNone}, e.Faults)
		require.True(t, e.MaxFaults >= 0 && e.MaxFaults <= MaxExploreFaults)
		if len(e.FaultFor) > 0 {
			require.Len(t, e.FaultFor, 2)
			require.Greater(t, e.FaultFor[0], Duration(0))
		}
	})
}
