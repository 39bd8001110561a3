package metricsel

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "sglang:num_requests_total", want: "sglang:num_requests_total"},
		{in: ` vllm:request_success_total{finished_reason="length"} `, want: `vllm:request_success_total{finished_reason="length"}`},
		{in: `m{b="2", a="x\"y"}`, want: `m{a="x\"y",b="2"}`},
		{in: `m{}`, want: "m"},
		{in: "", err: "empty selector"},
		{in: "9m", err: "not a metric name"},
		{in: `m{a="1"`, err: "missing '}'"},
		{in: `m{a!="1"}`, err: "only = matchers"},
		{in: `m{a=~"1"}`, err: "only = matchers"},
		{in: `m{a=1}`, err: "double-quoted"},
		{in: `m{a="1",a="2"}`, err: "given twice"},
		{in: `m{a="1" b="2"}`, err: "want ','"},
		{in: `m{a:b="1"}`, err: "not a label name"},
		{in: `m{a="1}`, err: "missing closing quote"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			s, err := Parse(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.String())
		})
	}
}

const exposition = `# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 7
vllm:request_success_total{engine="1",finished_reason="length",model_name="m"} 3
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 100
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="m"} 42
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{model_name="m",le="1"} 3
sglang:e2e_request_latency_seconds_bucket{model_name="m",le="+Inf"} 5
sglang:e2e_request_latency_seconds_sum{model_name="m"} 4.5
sglang:e2e_request_latency_seconds_count{model_name="m"} 5
# TYPE vllm:ttft_seconds summary
vllm:ttft_seconds{quantile="0.5"} 0.1
vllm:ttft_seconds_sum 2
vllm:ttft_seconds_count 8
`

func TestSum(t *testing.T) {
	fams, err := ParseText(strings.NewReader(exposition))
	require.NoError(t, err)
	for _, tc := range []struct {
		sel   string
		want  float64
		found bool
	}{
		{`vllm:request_success_total{finished_reason="length"}`, 10, true},
		{`vllm:request_success_total`, 110, true},
		{`vllm:request_success_total{finished_reason="remote_decode"}`, 0, false},
		{`sglang:num_requests_total`, 42, true},
		{`pdsoak:prefills_completed_total`, 0, false},
		// A histogram's or summary's _count and _sum are in the exposition as written,
		// but the parser files them under the base name: they matched nothing. The
		// base name itself matched with no value, a silent 0.
		{`sglang:e2e_request_latency_seconds_count`, 5, true},
		{`sglang:e2e_request_latency_seconds_count{model_name="m"}`, 5, true},
		{`sglang:e2e_request_latency_seconds_sum`, 4.5, true},
		{`vllm:ttft_seconds_count`, 8, true},
		{`sglang:e2e_request_latency_seconds`, 0, false},
		{`vllm:ttft_seconds`, 0, false},
		// As in PromQL, label="" matches a series without the label; it matched none.
		{`vllm:request_success_total{engine=""}`, 0, false},
		{`sglang:num_requests_total{engine=""}`, 42, true},
	} {
		s, err := Parse(tc.sel)
		require.NoError(t, err)
		got, found := s.Sum(fams)
		assert.Equal(t, tc.want, got, tc.sel)
		assert.Equal(t, tc.found, found, tc.sel)
	}
	_, err = ParseText(strings.NewReader("not exposition {"))
	require.Error(t, err)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"a", `a{b="c"}`, `a{b="c\\\"",d="e"}`, `a{`, `{}`, `a{b=}`, `a{b="\n"}`, "sglang:x_total"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(sel.String())
		require.NoError(t, err, "String() must parse back: %q", sel.String())
		assert.Equal(t, sel, again)
	})
}
