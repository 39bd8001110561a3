package reports

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

func goldenRun(t *testing.T) *Run {
	t.Helper()
	run, err := ComputeRun("testdata/events.jsonl", goldenConfig)
	require.NoError(t, err)
	return run
}

// synthetic is a run with n requests, bad of them ending as outcome o, and TTFTs ttft.
func synthetic(n, bad int, o ledger.Outcome, ttft float64, verdict Verdict) *Run {
	r := &Results{Requests: n, Verdict: verdict, Outcomes: map[ledger.Outcome]int{ledger.OutcomeOK: n - bad, o: bad}}
	if o.SilentDrop() {
		r.SilentDrops = bad
	}
	s := &Samples{}
	for i := range n {
		s.TTFT = append(s.TTFT, ttft*(1+0.01*float64(i%10)))
	}
	r.TTFT = percentiles(s.TTFT)
	return &Run{Results: r, Samples: s}
}

func TestCompareGates(t *testing.T) {
	tests := []struct {
		name      string
		base, new *Run
		regressed []string // substrings of the regressions, in order; none: no regression
	}{
		{name: "identical", base: synthetic(1000, 0, ledger.OutcomeRejected, 0.1, VerdictPass), new: synthetic(1000, 0, ledger.OutcomeRejected, 0.1, VerdictPass)},
		{name: "2% slower is within the floor", base: synthetic(1000, 0, ledger.OutcomeRejected, 0.1, VerdictPass), new: synthetic(1000, 0, ledger.OutcomeRejected, 0.102, VerdictPass)},
		{name: "twice as slow", base: synthetic(1000, 0, ledger.OutcomeRejected, 0.1, VerdictPass), new: synthetic(1000, 0, ledger.OutcomeRejected, 0.2, VerdictPass),
			regressed: []string{"run p50(ttft)", "run p90(ttft)", "run p99(ttft)"}},
		{name: "doubling below the absolute floor is not a regression", base: synthetic(1000, 0, ledger.OutcomeRejected, 0.001, VerdictPass), new: synthetic(1000, 0, ledger.OutcomeRejected, 0.002, VerdictPass)},
		{name: "faster is not a regression", base: synthetic(1000, 0, ledger.OutcomeRejected, 0.2, VerdictPass), new: synthetic(1000, 0, ledger.OutcomeRejected, 0.1, VerdictPass)},
		{name: "rejections 1% to 5%", base: synthetic(1000, 10, ledger.OutcomeRejected, 0.1, VerdictPass), new: synthetic(1000, 50, ledger.OutcomeRejected, 0.1, VerdictPass),
			regressed: []string{"run rate ok", "run rate rejected"}},
		{name: "significant but tiny rate change is not a regression", base: synthetic(100000, 0, ledger.OutcomeRejected, 0.1, VerdictPass), new: synthetic(100000, 50, ledger.OutcomeRejected, 0.1, VerdictPass)},
		{name: "one silent drop where there were none", base: synthetic(1000, 0, ledger.OutcomeStalled, 0.1, VerdictPass), new: synthetic(1000, 1, ledger.OutcomeStalled, 0.1, VerdictFail),
			regressed: []string{"NEW has 1 silent drop where BASE had none", "verdict pass → fail"}},
		{name: "drops in both: only the rate test", base: synthetic(1000, 1, ledger.OutcomeStalled, 0.1, VerdictFail), new: synthetic(1000, 2, ledger.OutcomeStalled, 0.1, VerdictFail)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tt.base, tt.new, "d", "d", CompareOptions{})
			require.Len(t, c.Regressions, len(tt.regressed), "%q", c.Regressions)
			for i, want := range tt.regressed {
				assert.Contains(t, c.Regressions[i], want)
			}
			assert.Equal(t, len(tt.regressed) > 0, c.Regressed())
		})
	}
}

func names(ss []Series) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

func TestScenarioDigest(t *testing.T) {
	base := `{"name":"n","seed":1,"duration":"30s","target":{"url":"http://a"},"reference":{"semantics":"strict"},"workloads":[{"type":"agents","agents":4}]}`
	tests := []struct {
		name string
		doc  string
		same bool
	}{
		{name: "seed, duration, target and reference differ", doc: `{"workloads":[{"agents":4,"type":"agents"}],"name":"n","seed":9,"duration":"1m","target":{"url":"http://b"},"reference":{"semantics":"sglang"}}`, same: true},
		{name: "workload differs", doc: `{"name":"n","workloads":[{"type":"agents","agents":5}]}`},
		{name: "name differs", doc: `{"name":"m","workloads":[{"type":"agents","agents":4}]}`},
	}
	want, err := ScenarioDigest([]byte(base))
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ScenarioDigest([]byte(tt.doc))
			require.NoError(t, err)
			assert.Equal(t, tt.same, got == want)
		})
	}
	_, err = ScenarioDigest([]byte("{"))
	assert.Error(t, err)
}

// TestCompareInvalidRunIsInconclusive: an invalid run (interrupted, its target or the
// harness failed) is not whole. Compared with a good run it is no evidence of a
// regression: the answer is inconclusive, naming the run and why, its would-be
// regressions listed, not judged; a FAIL stays a regression.
func TestCompareInvalidRunIsInconclusive(t *testing.T) {
	good := synthetic(1000, 0, ledger.OutcomeRejected, 0.1, VerdictPass)
	cut := synthetic(300, 150, ledger.OutcomeTransportError, 0.2, VerdictInvalid)
	cut.Results.InvalidReasons = []string{"interrupted before the run completed: SIGTERM"}

	c := Compare(good, cut, "d", "d", CompareOptions{})
	assert.True(t, c.Inconclusive())
	assert.False(t, c.Regressed(), "%q", c.Regressions)
	assert.NotEmpty(t, c.Regressions, "the would-be regressions are still listed")
	assert.Equal(t, []string{"NEW was invalid (interrupted before the run completed: SIGTERM)"}, c.Invalid)
	assert.Contains(t, c.VerdictText(), "INCONCLUSIVE: NEW was invalid (interrupted")

	c = Compare(cut, good, "d", "d", CompareOptions{})
	assert.Equal(t, []string{"BASE was invalid (interrupted before the run completed: SIGTERM)"}, c.Invalid)
	assert.False(t, c.Regressed())

	failed := synthetic(1000, 1, ledger.OutcomeStalled, 0.1, VerdictFail)
	c = Compare(good, failed, "d", "d", CompareOptions{})
	assert.False(t, c.Inconclusive())
	assert.True(t, c.Regressed(), "a failed run is evidence")
}

// TestMinTailBoundary: p90 is gated from 100 samples, p99 from 1,000 (10 beyond each, as
// the README says); 1 - 0.9 in floating point is a hair under 0.1, which left p90 of a
// 100-request run ungated.
func TestMinTailBoundary(t *testing.T) {
	for _, n := range []int{100, 1000} {
		c := Compare(synthetic(n, 0, ledger.OutcomeRejected, 0.1, VerdictPass), synthetic(n, 0, ledger.OutcomeRejected, 0.2, VerdictPass), "d", "d", CompareOptions{})
		for _, r := range c.Rows {
			switch {
			case r.Figure == "p90(ttft)", r.Figure == "p99(ttft)" && n == 1000:
				assert.NotNil(t, r.CI, "%d samples: %s is gated (%s)", n, r.Figure, r.Why)
			case r.Figure == "p99(ttft)":
				assert.Nil(t, r.CI, "%d samples: p99 is not", n)
			}
		}
	}
}

// TestCompareRecoveryNotMeasured: a fault whose recovery NEW could not measure (no
// request after it stopped: Recovered nil, as in a shorter run of the same scenario) is
// shown, not judged; one that was measured and did not recover is a regression.
func TestCompareRecoveryNotMeasured(t *testing.T) {
	withFault := func(recovered *bool) *Run {
		r := synthetic(1000, 0, ledger.OutcomeRejected, 0.1, VerdictPass)
		r.Results.Faults = []FaultResult{{Name: "kill", Type: "process_kill", Stop: Float(10), Recovered: recovered}}
		return r
	}
	c := Compare(withFault(ledger.Bool(true)), withFault(nil), "d", "d", CompareOptions{})
	assert.False(t, c.Regressed(), "%q", c.Regressions)
	c = Compare(withFault(ledger.Bool(true)), withFault(ledger.Bool(false)), "d", "d", CompareOptions{})
	require.True(t, c.Regressed())
	assert.Contains(t, c.Regressions[0], "recovered in BASE, not in NEW")
}
