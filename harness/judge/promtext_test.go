package judge

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMetrics(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]float64
	}{
		{
			name: "label sets are summed",
			in: `# HELP sglang:num_running_reqs running
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="ref",engine="decode"} 3
sglang:num_running_reqs{model_name="ref",engine="prefill"} 1
`,
			want: map[string]float64{"sglang:num_running_reqs": 4},
		},
		{
			// SGLang with --enable-dp-attention exports one series per dp_rank, vLLM one
			// per engine: a pool's usage is the fullest one's, not the sum.
			name: "usage fractions are the largest series",
			in: `# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 0.5
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 0.625
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.75
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
`,
			want: map[string]float64{"sglang:token_usage": 0.625, "vllm:kv_cache_usage_perc": 0.75},
		},
		{
			name: "timestamp, quoted label, untyped bucket",
			in: `sglang:num_queue_reqs 0 1700000000000
vllm:num_requests_waiting{model_name="a \"quoted\" } name"} 2.5
sglang:time_to_first_token_seconds_bucket{le="+Inf"} 7
`,
			want: map[string]float64{"sglang:num_queue_reqs": 0, "vllm:num_requests_waiting": 2.5,
				"sglang:time_to_first_token_seconds_bucket": 7},
		},
		{
			name: "counter",
			in:   "# TYPE sglang:num_requests_total counter\nsglang:num_requests_total{a=\"x\"} 5\nsglang:num_requests_total{a=\"y\"} 6\n",
			want: map[string]float64{"sglang:num_requests_total": 11},
		},
		{
			name: "histogram keeps its suffixed series",
			in: `# TYPE ttft histogram
ttft_bucket{le="0.1"} 1
ttft_bucket{le="+Inf"} 3
ttft_sum 0.9
ttft_count 3
`,
			want: map[string]float64{"ttft_bucket": 4, "ttft_sum": 0.9, "ttft_count": 3},
		},
		{
			name: "summary",
			in: `# TYPE lat summary
lat{quantile="0.5"} 0.2
lat_sum 2
lat_count 10
`,
			want: map[string]float64{"lat": 0.2, "lat_sum": 2, "lat_count": 10},
		},
		{
			name: "blank lines and comments",
			in:   "\n# just a comment\n  \nx 1\n",
			want: map[string]float64{"x": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMetrics(strings.NewReader(tt.in))
			require.NoError(t, err)
			assert.InDeltaMapValues(t, tt.want, got, 1e-9)
		})
	}
}

func TestParseMetricsNaN(t *testing.T) {
	got, err := ParseMetrics(strings.NewReader("weird_value NaN\n"))
	require.NoError(t, err)
	assert.True(t, math.IsNaN(got["weird_value"]), "got %v", got)
}

func TestParseMetricsErrors(t *testing.T) {
	tests := []struct{ name, in string }{
		{"unterminated label set", "x{a=\"b\" 1\n"},
		{"name starts with a digit", "9bad 1\n"},
		{"no value", "name\n"},
		{"bad value", "name abc\n"},
		{"too many fields", "name 1 2 3\n"},
		{"second TYPE line", "# TYPE a gauge\n# TYPE a counter\na 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMetrics(strings.NewReader(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "judge: metrics:")
		})
	}
}

func TestIsLeakGauge(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"sglang:num_running_reqs", true},
		{"sglang:num_decode_prealloc_queue_reqs", true},
		{"sglang:num_prefill_inflight_queue_reqs", true},
		{"sglang:num_decode_transfer_queue_reqs", true},
		{"sglang:num_prefill_prealloc_queue_reqs", true},
		{"sglang:num_prefill_bootstrap_queue_reqs", true},
		{"sglang:num_grammar_queue_reqs", true},
		{"sglang:num_retracted_reqs", false},
		{"vllm:num_requests_running", true},
		{"vllm:num_requests_waiting", true},
		{"sglang:num_requests_total", false},
		{"sglang:token_usage", false},
		{"sglang:num_aborted_reqs_total", false},
		{"http_requests_in_flight", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IsLeakGauge(tt.name))
		})
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add("sglang:num_running_reqs{a=\"b\"} 1\n# c\nx 2 3\n")
	f.Add("m{l=\"\\\"}\"} +Inf\n")
	f.Add("{} 1\n")
	f.Add("{\"utf8.name\",a=\"b\"} 1\n")
	f.Add("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseMetrics(strings.NewReader(in))
		if err != nil {
			require.Nil(t, got)
			return
		}
		for name := range got {
			require.True(t, metricsNames.IsValidMetricName(name), "invalid name %q accepted", name)
		}
	})
}
