package telemetry

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"
)

// writeRequest is a Prometheus remote-write 1.0 `prometheus.WriteRequest`, encoded by
// hand with protowire. client_golang/exp's remote.API does the transport (snappy,
// headers, retries) but ships only the 2.0 message types, and Debian's Prometheus 2.42
// (like most receivers deployed today) accepts 1.0 only; prometheus/prometheus's prompb
// would pull the whole server module in for four small messages. Size and
// MarshalToSizedBuffer are the methods remote.API.Write uses for such messages.
//
//	WriteRequest { repeated TimeSeries timeseries = 1; }
//	TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
//	Label        { string name = 1; string value = 2; }
//	Sample       { double value = 1; int64 timestamp = 2; }  // ms since the epoch
type writeRequest struct {
	series []timeSeries
	enc    []byte // cached encoding: Size and MarshalToSizedBuffer come in pairs
}

type timeSeries struct {
	labels []label // sorted by name, __name__ included
	value  float64
	ts     int64
}

type label struct{ name, value string }

func (w *writeRequest) encode() []byte {
	if w.enc != nil {
		return w.enc
	}
	var b, ts, lb []byte
	for _, s := range w.series {
		ts = ts[:0]
		for _, l := range s.labels {
			lb = lb[:0]
			lb = protowire.AppendTag(lb, 1, protowire.BytesType)
			lb = protowire.AppendString(lb, l.name)
			lb = protowire.AppendTag(lb, 2, protowire.BytesType)
			lb = protowire.AppendString(lb, l.value)
			ts = protowire.AppendTag(ts, 1, protowire.BytesType)
			ts = protowire.AppendBytes(ts, lb)
		}
		var smp []byte
		smp = protowire.AppendTag(smp, 1, protowire.Fixed64Type)
		smp = protowire.AppendFixed64(smp, math.Float64bits(s.value))
		smp = protowire.AppendTag(smp, 2, protowire.VarintType)
		smp = protowire.AppendVarint(smp, uint64(s.ts))
		ts = protowire.AppendTag(ts, 2, protowire.BytesType)
		ts = protowire.AppendBytes(ts, smp)
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, ts)
	}
	if b == nil {
		b = []byte{}
	}
	w.enc = b
	return b
}

// Size is the encoded length.
func (w *writeRequest) Size() int { return len(w.encode()) }

// MarshalToSizedBuffer writes the encoding into dst, which is Size() long.
func (w *writeRequest) MarshalToSizedBuffer(dst []byte) (int, error) {
	enc := w.encode()
	if len(dst) < len(enc) {
		return 0, fmt.Errorf("telemetry: remote write buffer of %d bytes, want %d", len(dst), len(enc))
	}
	return copy(dst[len(dst)-len(enc):], enc), nil
}

// toSeries flattens gathered families into remote-write series at timestamp ms, the way
// Prometheus itself would store a scrape of them: histograms as _bucket{le}, _sum and
// _count, summaries as {quantile}, _sum and _count. extra labels go on every series.
// Labels with an empty value are dropped.
func toSeries(mfs []*dto.MetricFamily, ms int64, extra map[string]string) []timeSeries {
	var out []timeSeries
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			// Empty values are left out, as a scrape leaves them out: remote write 1.0
			// forbids them, and receivers drop or refuse such series (an ok request's
			// cause is "", a run without --label has run_info{label=""}).
			base := make([]label, 0, len(m.GetLabel())+len(extra)+2)
			for _, lp := range m.GetLabel() {
				if lp.GetValue() != "" {
					base = append(base, label{lp.GetName(), lp.GetValue()})
				}
			}
			for k, v := range extra {
				if v != "" {
					base = append(base, label{k, v})
				}
			}
			add := func(n string, v float64, more ...label) {
				ls := append(append(append(make([]label, 0, len(base)+len(more)+1), base...), more...), label{"__name__", n})
				sort.Slice(ls, func(i, j int) bool { return ls[i].name < ls[j].name })
				out = append(out, timeSeries{labels: ls, value: v, ts: ms})
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", float64(b.GetCumulativeCount()), label{"le", formatFloat(b.GetUpperBound())})
				}
				add(name+"_bucket", float64(h.GetSampleCount()), label{"le", "+Inf"})
				add(name+"_sum", h.GetSampleSum())
				add(name+"_count", float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, q.GetValue(), label{"quantile", formatFloat(q.GetQuantile())})
				}
				add(name+"_sum", s.GetSampleSum())
				add(name+"_count", float64(s.GetSampleCount()))
			}
		}
	}
	return out
}

// formatFloat writes le and quantile values as the text exposition format does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
