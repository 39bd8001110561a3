package harness

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ParseMetrics reads Prometheus text exposition and returns the sum of every sample
// per metric name (label sets are summed: a gauge per queue per worker adds up to
// the queue's total). Comment and blank lines are skipped; a malformed line is an
// error naming its line number. Histogram and summary series keep their suffixed
// names (_bucket, _sum, _count).
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, v, err := parseSample(line)
		if err != nil {
			return out, fmt.Errorf("harness: metrics line %d: %w", n, err)
		}
		out[name] += v
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("harness: metrics: %w", err)
	}
	return out, nil
}

func parseSample(line string) (string, float64, error) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", 0, fmt.Errorf("no value in %q", clip(line))
	}
	name := line[:i]
	if !validName(name) {
		return "", 0, fmt.Errorf("bad metric name %q", clip(name))
	}
	rest := line[i:]
	if rest[0] == '{' {
		end, err := labelsEnd(rest)
		if err != nil {
			return "", 0, err
		}
		rest = rest[end+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return "", 0, fmt.Errorf("want value [timestamp] after %s, got %q", name, clip(rest))
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return "", 0, err
	}
	return name, v, nil
}

// labelsEnd returns the index of the '}' closing the label set at s[0], honouring
// quoted values with backslash escapes.
func labelsEnd(s string) (int, error) {
	inQuote := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i, nil
		}
	}
	return 0, fmt.Errorf("unterminated label set in %q", clip(s))
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("bad value %q", clip(s))
	}
	return v, nil
}

func validName(s string) bool {
	for i, c := range s {
		ok := c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return s != ""
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// leakGauges are the gauges that must return to 0 once load has drained: running and
// queued requests, SGLang's PD queues (prefill bootstrap and inflight, decode prealloc
// and transfer, retracted) and vLLM's running, waiting and swapped.
var leakGauges = []string{
	"sglang:num_running_reqs",
	"sglang:num_queue_reqs",
	"sglang:num_decode_prealloc_queue_reqs",
	"sglang:num_decode_transfer_queue_reqs",
	"sglang:num_prefill_prealloc_queue_reqs",
	"sglang:num_prefill_inflight_queue_reqs",
	"sglang:num_retracted_reqs",
	"sglang:num_bootstrap_queue_reqs",
	"vllm:num_requests_running",
	"vllm:num_requests_waiting",
	"vllm:num_requests_swapped",
}

// IsLeakGauge reports whether a metric name is a running/queued gauge checked by the
// leak check: one of the known names, or any sglang:/vllm: num_*reqs gauge naming a
// queue, running set, prealloc, transfer, bootstrap or inflight stage.
func IsLeakGauge(name string) bool {
	for _, g := range leakGauges {
		if name == g {
			return true
		}
	}
	if !strings.HasPrefix(name, "sglang:num_") && !strings.HasPrefix(name, "vllm:num_") {
		return false
	}
	if strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_created") {
		return false
	}
	for _, k := range []string{"running", "queue", "waiting", "swapped", "prealloc", "transfer", "bootstrap", "inflight"} {
		if strings.Contains(name, k) && strings.HasSuffix(name, "reqs") {
			return true
		}
	}
	return false
}

// sampleGauges are recorded in periodic sample events besides the leak gauges.
var sampleGauges = []string{"sglang:token_usage", "sglang:gen_throughput", "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"}
