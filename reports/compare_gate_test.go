package reports

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

func TestGroupBySession(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6}
	keys := []string{"a#1", "", "a#2", "a#1", "", "a#2"}
	vals, ends := GroupBySession(xs, keys)
	assert.Equal(t, []float64{2, 5, 1, 4, 3, 6}, vals, "open-loop samples alone, then each session's together")
	assert.Equal(t, []int{1, 2, 4, 6}, ends)
	vals, ends = GroupBySession(xs, make([]string, len(xs)))
	assert.Equal(t, xs, vals)
	assert.Nil(t, ends, "no session: per sample")
	_, ends = GroupBySession(xs, nil)
	assert.Nil(t, ends)
}

// sessionRun is an agents run: sessions × turns TTFTs where each session has its own
// level (a session stuck behind a long context is slow on every turn) drawn from seed.
func sessionRun(seed uint64, sessions, turns int, grouped bool) *Run {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &Samples{}
	for i := range sessions {
		level := 0.1 * (1 + 2*rng.Float64())
		for range turns {
			s.TTFT = append(s.TTFT, level*(1+0.02*rng.Float64()))
			if grouped {
				s.TTFTSessions = append(s.TTFTSessions, "agents#"+string(rune('A'+i)))
			}
		}
	}
	return &Run{Results: &Results{Requests: len(s.TTFT), Verdict: VerdictPass, TTFT: percentiles(s.TTFT),
		Outcomes: map[ledger.Outcome]int{ledger.OutcomeOK: len(s.TTFT)}}, Samples: s}
}

// TestSessionResampling: two runs of the same server whose sessions happen to draw
// different levels. Resampled per request, the 600 correlated turns look like 600
// independent samples and the interval is far too narrow: a false regression.
// Resampled by session (20 of them), the interval is as wide as the data allow.
func TestSessionResampling(t *testing.T) {
	perRequest := Compare(sessionRun(7, 20, 30, false), sessionRun(8, 20, 30, false), "d", "d", CompareOptions{})
	bySession := Compare(sessionRun(7, 20, 30, true), sessionRun(8, 20, 30, true), "d", "d", CompareOptions{})
	row := func(c *Comparison, fig string) Row {
		for _, r := range c.Rows {
			if r.Figure == fig {
				return r
			}
		}
		t.Fatalf("no row %s", fig)
		return Row{}
	}
	pr, sr := row(perRequest, "p50(ttft)"), row(bySession, "p50(ttft)")
	require.NotNil(t, pr.CI)
	require.NotNil(t, sr.CI)
	assert.Equal(t, pr.New, sr.New, "same samples")
	assert.Greater(t, sr.CI.Hi-sr.CI.Lo, 2*(pr.CI.Hi-pr.CI.Lo), "per request %v, by session %v", *pr.CI, *sr.CI)
	assert.True(t, perRequest.Regressed(), "per-request resampling calls the same server a regression: %q", perRequest.Regressions)
	assert.False(t, bySession.Regressed(), "%q", bySession.Regressions)
}

// itlRun is n requests of k tokens each, every gap gap·(1 ± 2%).
func itlRun(seed uint64, n, k int, gap float64) *Run {
	rng := rand.New(rand.NewPCG(seed, 2))
	s := &Samples{}
	for range n {
		for range k {
			s.ITL = append(s.ITL, gap*(0.98+0.04*rng.Float64()))
		}
		s.ITLEnds = append(s.ITLEnds, len(s.ITL))
		s.TTFT = append(s.TTFT, 0.0005*(0.9+0.2*rng.Float64()))
	}
	return &Run{Results: &Results{Requests: n, Verdict: VerdictPass, ITL: percentiles(s.ITL), TTFT: percentiles(s.TTFT),
		Outcomes: map[ledger.Outcome]int{ledger.OutcomeOK: n}}, Samples: s}
}

// TestFloors: per-metric floors. A 15% slower ITL of 10 ms (1.5 ms more, which the old
// single 5 ms minimum hid) is a regression; a sub-millisecond TTFT that doubles is not
// (below its absolute floor); --tolerance and --min-latency-change replace the floors.
func TestFloors(t *testing.T) {
	base, slower := itlRun(1, 500, 20, 0.010), itlRun(2, 500, 20, 0.0115)
	c := Compare(base, slower, "d", "d", CompareOptions{})
	require.True(t, c.Regressed())
	assert.Contains(t, strings.Join(c.Regressions, "\n"), "run p50(itl)")

	same := Compare(base, itlRun(3, 500, 20, 0.010), "d", "d", CompareOptions{})
	assert.False(t, same.Regressed(), "%q", same.Regressions)

	doubled := itlRun(2, 500, 20, 0.010)
	for i := range doubled.Samples.TTFT {
		doubled.Samples.TTFT[i] *= 2
	}
	doubled.Results.TTFT = percentiles(doubled.Samples.TTFT)
	c = Compare(base, doubled, "d", "d", CompareOptions{})
	assert.False(t, c.Regressed(), "0.5 ms → 1 ms TTFT is under TTFT's absolute floor: %q", c.Regressions)
	c = Compare(base, doubled, "d", "d", CompareOptions{MinLatencyChange: 0.0001})
	assert.True(t, c.Regressed(), "a smaller absolute floor lets it through")

	c = Compare(base, slower, "d", "d", CompareOptions{Tolerance: 0.2})
	assert.False(t, c.Regressed(), "a 20%% tolerance hides 15%%: %q", c.Regressions)

	fl := CompareOptions{Floors: map[string]Floor{"itl": {Rel: 0.5, Abs: 0}}}.EffectiveFloors()
	assert.Equal(t, Floor{Rel: 0.5}, fl["itl"])
	assert.Equal(t, Floor{Rel: DefaultTolerance, Abs: DefaultMinLatencyChange}, fl["ttft"], "a metric left out gets the old defaults")
}

func contended(r *Run, pressure float64) *Run {
	res := *r.Results
	res.Contention = &ContentionResult{Windows: 10, Metrics: map[string]ContentionStat{
		ledger.ContentionCPUPressure: {Mean: pressure, P90: pressure, Max: pressure},
		ledger.ContentionTickLag:     {Mean: 0.001, P90: 0.002, Max: 0.003},
	}}
	return &Run{Results: &res, Samples: r.Samples}
}

func TestIdentityDifferences(t *testing.T) {
	ref := `{"reference": {"backend": "simtime", "profile": "llama3-8b-h100"}}`
	launch := `{"target": {"launch": [{"name": "decode", "command": ["python3", "-m", "sglang.launch_server", "--port", "30001"]}]}}`
	id := func(mode, server, sc string) Identity {
		r := &Results{Mode: mode}
		if server != "" {
			r.Provenance = &Provenance{ServerVersion: server}
		}
		got, err := IdentityOf(r, []byte(sc))
		require.NoError(t, err)
		return got
	}
	a := id("", "", ref)
	assert.Equal(t, Identity{Mode: "real", Backend: "simtime", Profile: "llama3-8b-h100"}, a)
	assert.Empty(t, a.Differences(id("", "", ref)))
	assert.Equal(t, []string{"real run vs sim run (a simulated run is not a measurement of a real one)"}, a.Differences(id(ledger.ModeSim, "", ref)))
	assert.Equal(t, []string{`backend "simtime" vs "tinyref"`, `profile "llama3-8b-h100" vs (none)`}, a.Differences(id("", "", `{}`)))
	l := id("", "0.4.1", launch)
	assert.Equal(t, "decode: python3 -m sglang.launch_server --port 30001", l.Launch)
	assert.Equal(t, []string{`server version "0.4.1" vs "0.4.2"`}, l.Differences(id("", "0.4.2", strings.Replace(launch, "30001", "30002", 1))),
		"launches that differ only in their ports are the same target")
	assert.Equal(t, []string{`target.launch "decode: python3 -m sglang.launch_server --port 30001" vs "decode: python3 -m sglang.launch_server --port 30001 --tp 2"`},
		l.Differences(id("", "0.4.1", strings.Replace(launch, `"30001"]`, `"30001", "--tp", "2"]`, 1))))
	assert.Equal(t, "x --port=<port> y 127.0.0.1:<port> [::1]:<port> --grpc-port <port> --base-gpu-id=1",
		MaskPorts("x --port=30000 y 127.0.0.1:8998 [::1]:9 --grpc-port 7 --base-gpu-id=1"))
	_, err := IdentityOf(&Results{}, []byte("{"))
	assert.ErrorContains(t, err, "reports: identity")
}

func FuzzIdentityOf(f *testing.F) {
	f.Add([]byte(`{"reference": {"backend": "simtime", "profile": "p"}}`))
	f.Add([]byte(`{"target": {"launch": [{"name": "d", "launcher": "a b", "command": ["x"], "extra_args": "--y 1"}]}}`))
	f.Add([]byte(`{"target": {"url": "http://h"}}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := IdentityOf(&Results{}, data)
		if err == nil && id.Mode != "real" {
			t.Fatalf("mode %q for a real run", id.Mode)
		}
	})
}
