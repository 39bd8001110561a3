package harness

import (
	"math"
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	in := `# HELP sglang:num_running_reqs running
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="ref",engine="decode"} 3
sglang:num_running_reqs{model_name="ref",engine="prefill"} 1
sglang:num_queue_reqs 0 1700000000000
vllm:num_requests_waiting{model_name="a \"quoted\" } name"} 2.5
sglang:time_to_first_token_seconds_bucket{le="+Inf"} 7
weird_value NaN
`
	got, err := ParseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got["sglang:num_running_reqs"] != 4 || got["sglang:num_queue_reqs"] != 0 ||
		got["vllm:num_requests_waiting"] != 2.5 || got["sglang:time_to_first_token_seconds_bucket"] != 7 ||
		!math.IsNaN(got["weird_value"]) {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"x{a=\"b\" 1", "9bad 1", "name", "name abc", "name 1 2 3"} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: want error", bad)
		}
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
		{"vllm:num_requests_running", true},
		{"vllm:num_requests_waiting", true},
		{"sglang:num_requests_total", false},
		{"sglang:token_usage", false},
		{"sglang:num_aborted_reqs_total", false},
		{"http_requests_in_flight", false},
	}
	for _, tt := range tests {
		if got := IsLeakGauge(tt.name); got != tt.want {
			t.Errorf("%s: got %v want %v", tt.name, got, tt.want)
		}
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add("sglang:num_running_reqs{a=\"b\"} 1\n# c\nx 2 3\n")
	f.Add("m{l=\"\\\"}\"} +Inf\n")
	f.Add("{} 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseMetrics(strings.NewReader(in))
		if err == nil {
			for name := range got {
				if !validName(name) {
					t.Fatalf("invalid name %q accepted", name)
				}
			}
		}
	})
}
