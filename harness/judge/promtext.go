package judge

import (
	"fmt"
	"io"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"pdsoak/metricnames"
)

// metricsNames is how metric and label names are validated: UTF-8, as Prometheus 3 and
// current exporters allow (the legacy [a-zA-Z_:][a-zA-Z0-9_:]* names are a subset).
const metricsNames = model.UTF8Validation

// ParseMetrics reads Prometheus text exposition (through prometheus/common's expfmt)
// and returns the sum of every sample per series name: label sets are summed, so a
// gauge per queue per worker adds up to the queue's total; a pool's usage fraction
// (metricnames.PoolUsageGauges) is its largest series instead. Histogram and summary
// series keep their suffixed names (_bucket, _sum, _count; a summary's quantiles add
// up under its own name). Malformed input is an error naming its line.
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	p := expfmt.NewTextParser(metricsNames)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("judge: metrics: %w", err)
	}
	out := map[string]float64{}
	for name, mf := range fams {
		if typ := mf.GetType(); slices.Contains(metricnames.PoolUsageGauges, name) &&
			(typ == dto.MetricType_GAUGE || typ == dto.MetricType_UNTYPED) {
			for i, m := range mf.GetMetric() {
				v := m.GetGauge().GetValue() + m.GetUntyped().GetValue() // one of them is set
				if i == 0 || v > out[name] {
					out[name] = v
				}
			}
			continue
		}
		for _, m := range mf.GetMetric() {
			addSample(out, name, mf.GetType(), m)
		}
	}
	return out, nil
}

// addSample adds one metric of a family to out under the names its series have in
// the text format.
func addSample(out map[string]float64, name string, typ dto.MetricType, m *dto.Metric) {
	switch typ {
	case dto.MetricType_COUNTER:
		out[name] += m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		out[name] += m.GetGauge().GetValue()
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		for _, q := range s.GetQuantile() {
			out[name] += q.GetValue()
		}
		out[name+"_sum"] += s.GetSampleSum()
		out[name+"_count"] += float64(s.GetSampleCount())
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			out[name+"_bucket"] += float64(b.GetCumulativeCount()) + b.GetCumulativeCountFloat()
		}
		out[name+"_sum"] += h.GetSampleSum()
		out[name+"_count"] += float64(h.GetSampleCount()) + h.GetSampleCountFloat()
	default: // untyped
		out[name] += m.GetUntyped().GetValue()
	}
}

// leakGauges are the gauges that must return to 0 once load has drained: running and
// queued requests, SGLang's PD queues (prefill bootstrap and inflight, decode prealloc
// and transfer) and vLLM's running, waiting and swapped.
var leakGauges = metricnames.LeakGauges

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

// IsSampleGauge reports whether periodic sample events record the gauge: a leak gauge
// or one of the usage and throughput gauges.
func IsSampleGauge(name string) bool { return IsLeakGauge(name) || slices.Contains(sampleGauges, name) }

// sampleGauges are recorded in periodic sample events besides the leak gauges.
var sampleGauges = metricnames.UsageGauges
