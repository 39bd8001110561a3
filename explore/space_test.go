package explore

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/reports"
	"pdsoak/scenarios"
)

// TestDraw: every drawn value lies in its range, a run's parameters depend on (seed,
// i) only, and a wide range is drawn log-uniformly (small pools are tried often).
func TestDraw(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	space := NewSpace(sc, testFaultTypes(), nil)
	small, seeds := 0, map[int64]bool{}
	for i := range 500 {
		p := space.Draw(1, i)
		require.Equal(t, p, space.Draw(1, i), "run %d is not a function of (seed, i)", i)
		seeds[p.Seed] = true
		w := p.Workloads[0]
		require.True(t, w.Agents >= 5 && w.Agents <= 40, "agents %d", w.Agents)
		require.True(t, w.Turns >= 2 && w.Turns <= 8, "turns %d", w.Turns)
		require.Len(t, p.Flags, 1)
		f := p.Flags[0]
		require.True(t, f.Integer)
		require.True(t, f.Value >= 512 && f.Value <= 65536, "flag %v", f.Value)
		if f.Value < 1000 {
			small++
		}
		require.LessOrEqual(t, len(p.Faults), 1)
		for _, fl := range p.Faults {
			assert.Equal(t, "decode_crash", fl.Type)
			assert.Equal(t, "decode-0", fl.Target)
			require.True(t, fl.At >= 0 && fl.For >= scenarios.Duration(1e9) && fl.At+fl.For <= p.Duration, "fault %+v", fl)
		}
	}
	assert.Greater(t, len(seeds), 490, "seeds repeat")
	// log-uniform over [512, 65536]: P(< 1000) = ln(1000/512)/ln(128) ≈ 14%.
	assert.Greater(t, small, 35, "values below 1000 drawn %d times in 500", small)
	assert.NotEqual(t, space.Draw(1, 0), space.Draw(2, 0), "the explore seed changes nothing")
}

func TestDrawNoExploreSection(t *testing.T) {
	text := wedgeScenario[:strings.Index(wedgeScenario, "explore:")]
	sc := loadWedge(t, text)
	space := NewSpace(sc, testFaultTypes(), nil)
	p := space.Draw(1, 3)
	assert.NotEqual(t, sc.Seed, p.Seed)
	q := space.Base()
	q.Seed = p.Seed
	assert.Equal(t, q, p, "without an explore section only the seed varies")
	assert.Equal(t, "seed only", (*scenarios.Explore)(nil).String())
}

// TestCatalogue: catalogue mode draws every type that can run with its defaults, on
// targets of the kinds it accepts; every generated scenario passes the strict loader.
func TestCatalogue(t *testing.T) {
	text := strings.Replace(wedgeScenario, "explore:\n", "explore:\n  faults: catalogue\n  max_faults: 4\n  duration: [5s, 30s]\n", 1)
	sc := loadWedge(t, text)
	space := NewSpace(sc, testFaultTypes(), nil)
	assert.Equal(t, []string{"client_disconnect", "decode_crash"}, space.FaultTypes(), "failpoint needs a param")
	s := &searcher{space: space, opts: Options{FaultTypes: testFaultTypes()}}
	types := map[string]bool{}
	for i := range 200 {
		p := space.Draw(9, i)
		require.True(t, p.Duration >= scenarios.Duration(5e9) && p.Duration <= scenarios.Duration(30e9))
		require.LessOrEqual(t, len(p.Faults), 4)
		for _, f := range p.Faults {
			types[f.Type] = true
			switch f.Type {
			case "decode_crash":
				assert.Contains(t, []string{"router", "prefill-0", "decode-0"}, f.Target)
			case "client_disconnect":
				assert.Contains(t, []string{"client", "agents"}, f.Target)
			}
		}
		_, _, err := s.materialise(p, nil)
		require.NoError(t, err, "run %d: %+v", i, p)
	}
	assert.Len(t, types, 2)

	// A filter (the simulator's CanModel) leaves out what it refuses.
	onlyDecode := func(_ *scenarios.Scenario, f scenarios.Fault) error {
		if f.Type == "decode_crash" && f.Target != "decode-0" {
			return errors.New("needs decode")
		}
		return nil
	}
	filtered := NewSpace(sc, testFaultTypes(), onlyDecode)
	for i := range 200 {
		for _, f := range filtered.Draw(9, i).Faults {
			if f.Type == "decode_crash" {
				require.Equal(t, "decode-0", f.Target)
			}
		}
	}
}

// TestRenderRoundTrip: every shipped scenario with an embedded target, applied with
// its own parameters and rendered, loads back as the same scenario.
func TestRenderRoundTrip(t *testing.T) {
	for _, info := range scenarios.List() {
		t.Run(info.Name, func(t *testing.T) {
			sc, err := scenarios.Load(info.Name)
			require.NoError(t, err)
			if Check(sc) != nil {
				t.Skip("external target")
			}
			space := NewSpace(sc, nil, nil)
			data, err := Render(space.Apply(space.Base()), []string{"a header", "", "more"})
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(string(data), "# a header\n#\n# more\n"))
			back, err := scenarios.Parse(info.File, data)
			require.NoError(t, err, "%s", data)
			plain := *sc
			plain.Explore = nil // Render leaves the search space out: the file is one run
			want, _ := json.Marshal(&plain)
			got, _ := json.Marshal(back)
			assert.JSONEq(t, string(want), string(got))
		})
	}
}

func TestApplyFlagsAndLoad(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	space := NewSpace(sc, testFaultTypes(), nil)
	p := space.Base()
	p.Flags = []FlagValue{{List: "decode", Name: "--context-length", Value: 2048, Integer: true}, {List: "args", Name: "--mem-fraction-static", Value: 0.85}}
	p.Workloads[0].Agents = 3
	p.Faults = nil
	got := space.Apply(p)
	assert.Equal(t, []string{"--context-length=2048"}, got.Reference.DecodeArgs)
	assert.Equal(t, []string{"--mem-fraction-static=0.85"}, got.Reference.Args)
	assert.Empty(t, sc.Reference.Args, "Apply must not edit the base scenario")
	assert.Equal(t, []string{"--context-length=4096"}, sc.Reference.DecodeArgs)
	assert.Equal(t, 3, got.Workloads[0].Agents)
	assert.Equal(t, 30, sc.Workloads[0].Agents)
	assert.False(t, got.Reference.FaultInjection, "no faults: no failpoints")
	assert.Equal(t, []string{reports.AssertNoSilentDrops, reports.AssertValidResponses}, got.Assertions)
}

// TestApplyDropsRecovery: with its faults shrunk away, a scenario that listed recovery
// no longer lists it (validation would refuse it).
func TestApplyDropsRecovery(t *testing.T) {
	text := strings.Replace(wedgeScenario, "assertions: [no_silent_drops, valid_responses]", "assertions: [no_silent_drops, recovery]", 1)
	sc := loadWedge(t, text)
	space := NewSpace(sc, testFaultTypes(), nil)
	p := space.Base()
	p.Faults = nil
	s := &searcher{space: space, opts: Options{FaultTypes: testFaultTypes()}}
	_, back, err := s.materialise(p, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{reports.AssertNoSilentDrops}, back.Assertions)
}

func TestSetFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"absent", []string{"--a=1"}, []string{"--a=1", "--x=5"}},
		{"equals form", []string{"--x=1", "--a"}, []string{"--x=5", "--a"}},
		{"two words", []string{"--x", "1", "--a"}, []string{"--x=5", "--a"}},
		{"boolean before a flag", []string{"--x", "--a=2"}, []string{"--x=5", "--a=2"}},
		{"repeated", []string{"--x=1", "--a", "--x=2"}, []string{"--x=5", "--a"}},
		{"prefix is another flag", []string{"--xy=1"}, []string{"--xy=1", "--x=5"}},
		{"empty", nil, []string{"--x=5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.args)
			assert.Equal(t, tc.want, setFlag(tc.args, "--x", "5"))
			assert.Equal(t, orig, tc.args, "setFlag edited its input")
			v, ok := flagValue(tc.want, "--x")
			assert.True(t, ok)
			assert.Equal(t, "5", v)
		})
	}
}

func FuzzSetFlag(f *testing.F) {
	f.Add("--a=1 --x 3 --b", "--x", "7")
	f.Add("--x", "--x", "1")
	f.Add("", "--max-total-tokens", "999")
	f.Fuzz(func(t *testing.T, args, name, value string) {
		if !strings.HasPrefix(name, "--") || strings.ContainsAny(name, "= ") || strings.HasPrefix(value, "-") || strings.Contains(value, " ") {
			return
		}
		in := strings.Fields(args)
		out := setFlag(in, name, value)
		v, ok := flagValue(out, name)
		require.True(t, ok)
		require.Equal(t, value, v)
		n := 0
		for _, a := range out {
			if a == name || strings.HasPrefix(a, name+"=") {
				n++
			}
		}
		require.Equal(t, 1, n, "%q", out)
	})
}

func TestSignature(t *testing.T) {
	fail := func(names ...string) []reports.AssertionResult {
		var out []reports.AssertionResult
		for _, n := range names {
			out = append(out, reports.AssertionResult{Name: n, State: reports.StateFail})
		}
		return append(out, reports.AssertionResult{Name: "ok_one", State: reports.StatePass, Passed: true})
	}
	tests := []struct {
		name string
		res  *reports.Results
		want string
	}{
		{"pass", &reports.Results{Verdict: reports.VerdictPass}, ""},
		{"invalid", &reports.Results{Verdict: reports.VerdictInvalid, Assertions: fail("no_silent_drops")}, ""},
		{"nil", nil, ""},
		{"assertion only", &reports.Results{Verdict: reports.VerdictFail, Assertions: fail("valid_responses")}, "valid_responses"},
		{"with stages", &reports.Results{Verdict: reports.VerdictFail, Assertions: fail("valid_responses", "no_silent_drops"),
			DropStages: map[string]int{"decode-0: prealloc": 3, "decode-1: prealloc": 1, "prefill-0: bootstrap": 2}},
			"no_silent_drops+valid_responses@decode:prealloc,prefill:bootstrap"},
		{"bare stage", &reports.Results{Verdict: reports.VerdictFail, Assertions: fail("no_silent_drops"), DropStages: map[string]int{"waiting": 1}},
			"no_silent_drops@waiting"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Signature(tc.res))
		})
	}
	assert.Equal(t, "shrunk-p99-ttft-2s.yaml", FileName("p99(ttft) < 2s"))
	assert.Equal(t, "shrunk-failure.yaml", FileName("///"))
}
