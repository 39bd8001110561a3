package assertion

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAssertion(t *testing.T) {
	tests := []struct {
		in, name string
		value    float64
		err      string
	}{
		{"no_silent_drops", "no_silent_drops", 0, ""},
		{" recovery ", "recovery", 0, ""},
		{"p99(ttft) < 2s", "p99(ttft) < 2s", 2, ""},
		{"p50( itl )<=250ms", "p50(itl) <= 250ms", 0.25, ""},
		{"mean(e2e) > 1.5s", "mean(e2e) > 1.5s", 1.5, ""},
		{"p99(ttft) < 2", "", 0, `"2" has no unit: write a duration such as 2s or 2ms`},
		{"max(e2e) != 0", "max(e2e) != 0s", 0, ""},
		{"max(e2e) != 0s", "max(e2e) != 0s", 0, ""},
		{"rate(rejected) < 0.1", "rate(rejected) < 0.1", 0.1, ""},
		{"rate(silent_drops) == 0", "rate(silent_drops) == 0", 0, ""},
		{"count(stalled) == 0", "count(stalled) == 0", 0, ""},
		{"count(ok) >= 100", "count(ok) >= 100", 100, ""},
		{"p99(ttfb) < 2s", "", 0, "takes ttft, itl or e2e"},
		{"p95(ttft) < 2s", "p95(ttft) < 2s", 2, ""},
		{"p59(ttft) < 2s", "", 0, `unknown function "p59" (did you mean "p50"?)`},
		{"rate(stalld) < 1", "", 0, `(did you mean "stalled"?)`},
		{"count(silent_drop) == 0", "", 0, `(did you mean "silent_drops"?)`},
		{"p99(tftt) < 2s", "", 0, `(did you mean "ttft"?)`},
		{"cuont(ok) > 1", "", 0, `(did you mean "count"?)`},
		{"no_leak", "", 0, `(did you mean "no_leaks"?)`},
		{"rate(zzzzzz) < 1", "", 0, `not "zzzzzz"`},
		{"rate(bogus) < 1", "", 0, "takes an outcome"},
		{"rate(ok) > 1.5", "", 0, "fraction"},
		{"count(ok) > 1.5", "", 0, "whole number"},
		{"p99(ttft) 2s", "", 0, "want an operator"},
		{"p99(ttft) <", "", 0, "missing value"},
		{"p99(ttft < 2s", "", 0, "missing ')'"},
		{"p99(ttft) < soon", "", 0, "not a duration"},
		{"no_silent_drop", "", 0, "unknown assertion"},
		// A bound every run meets can never fail; one no run meets can never pass.
		{"rate(rejected) <= 1", "", 0, "can never fail (a rate is never above 1)"},
		{"rate(ok) >= 0", "", 0, "can never fail (a rate is never below 0)"},
		{"count(stalled) >= 0", "", 0, "can never fail (a count is never below 0)"},
		{"p99(ttft) >= 0s", "", 0, "can never fail (a latency is never below 0)"},
		{"rate(ok) > 1", "", 0, "can never pass (a rate is never above 1)"},
		{"count(ok) < 0", "", 0, "can never pass (a count is never below 0)"},
		{"max(e2e) < 0s", "", 0, "can never pass (a latency is never below 0)"},
		{"explained_errors(rate <= 1)", "", 0, "can never fail (a rate is never above 1)"},
		{"explained_errors(count < 0)", "", 0, "can never pass (a count is never below 0)"},
		{"rate(ok) >= 0.5", "rate(ok) >= 0.5", 0.5, ""},
		{"count(ok) > 0", "count(ok) > 0", 0, ""},
		{"rate(stalled) <= 0", "rate(stalled) <= 0", 0, ""},
	}
	_, err := ParseAssertion("rate(zzzzzz) < 1")
	assert.NotContains(t, err.Error(), "did you mean", "no hint when nothing is close")
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := ParseAssertion(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.name, a.Name)
			assert.Equal(t, tt.value, a.Value)
		})
	}
}

func FuzzParseAssertion(f *testing.F) {
	for _, s := range []string{"p99(ttft) < 2s", "rate(rejected) < 0.1", "count(stalled) == 0", "no_leaks", "max(e2e)>=1e3", "p50(itl) != 0.5", "(((", "rate() <"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAssertion(s)
		if err != nil {
			return
		}
		// The normalised form parses back to the same assertion.
		b, err := ParseAssertion(a.String())
		require.NoError(t, err, "normalised %q does not parse", a.String())
		require.Equal(t, []any{a.Builtin(), a.Func, a.Arg, a.Op}, []any{b.Builtin(), b.Func, b.Arg, b.Op}, "round trip %q -> %q changed it", s, a.String())
	})
}
