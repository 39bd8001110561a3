package metricsel

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Selector is a metric name and the labels a series must have (exact values; "" also
// matches a series without the label, as in PromQL).
type Selector struct {
	Name   string
	Labels []Label // sorted by name, names unique
}

// Label is one equality matcher.
type Label struct{ Name, Value string }

// MaxLen bounds a selector's text.
const MaxLen = 1024

// Parse parses NAME or NAME{label="value",...}. Errors say what is wrong and where.
func Parse(s string) (Selector, error) {
	in := s
	s = strings.TrimSpace(s)
	if s == "" {
		return Selector{}, errors.New("metricsel: empty selector (want a metric name such as sglang:num_requests_total)")
	}
	if len(s) > MaxLen {
		return Selector{}, fmt.Errorf("metricsel: selector longer than %d characters", MaxLen)
	}
	name, rest, hasLabels := strings.Cut(s, "{")
	name = strings.TrimSpace(name)
	if !validName(name, true) {
		return Selector{}, fmt.Errorf("metricsel: %q: %q is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)", in, name)
	}
	sel := Selector{Name: name}
	if !hasLabels {
		return sel, nil
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasSuffix(rest, "}") {
		return Selector{}, fmt.Errorf("metricsel: %q: missing '}'", in)
	}
	body := strings.TrimSpace(strings.TrimSuffix(rest, "}"))
	seen := map[string]bool{}
	for body != "" {
		eq := strings.IndexAny(body, "=!~")
		if eq < 0 {
			return Selector{}, fmt.Errorf("metricsel: %q: want label=\"value\" in %q", in, body)
		}
		ln := strings.TrimSpace(body[:eq])
		if body[eq] != '=' || strings.HasPrefix(body[eq:], "=~") {
			return Selector{}, fmt.Errorf("metricsel: %q: only = matchers are allowed (label %q)", in, ln)
		}
		if !validName(ln, false) {
			return Selector{}, fmt.Errorf("metricsel: %q: %q is not a label name", in, ln)
		}
		if seen[ln] {
			return Selector{}, fmt.Errorf("metricsel: %q: label %q given twice", in, ln)
		}
		seen[ln] = true
		val, after, err := quoted(strings.TrimSpace(body[eq+1:]))
		if err != nil {
			return Selector{}, fmt.Errorf("metricsel: %q: label %s: %w", in, ln, err)
		}
		sel.Labels = append(sel.Labels, Label{ln, val})
		after = strings.TrimSpace(after)
		if after != "" && after[0] != ',' {
			return Selector{}, fmt.Errorf("metricsel: %q: want ',' or '}' after label %s", in, ln)
		}
		body = strings.TrimSpace(strings.TrimPrefix(after, ","))
	}
	sort.Slice(sel.Labels, func(i, j int) bool { return sel.Labels[i].Name < sel.Labels[j].Name })
	return sel, nil
}

// quoted reads a double-quoted string with \" \\ \n escapes; it returns the value and
// what follows the closing quote.
func quoted(s string) (string, string, error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", errors.New(`the value must be double-quoted ("value")`)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 == len(s) {
				return "", "", errors.New("unterminated escape")
			}
			i++
			switch s[i] {
			case '"', '\\':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			default:
				return "", "", fmt.Errorf(`unknown escape \%c`, s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("missing closing quote")
}

// validName checks the legacy Prometheus name grammar (colons only in metric names).
func validName(s string, metric bool) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (metric && c == ':') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// valueEscaper writes a label value as the exposition format (and Parse) reads it.
var valueEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// String is the selector in the form Parse reads.
func (s Selector) String() string {
	if len(s.Labels) == 0 {
		return s.Name
	}
	parts := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		parts[i] = l.Name + `="` + valueEscaper.Replace(l.Value) + `"`
	}
	return s.Name + "{" + strings.Join(parts, ",") + "}"
}

// ParseText reads one Prometheus text exposition into metric families.
func ParseText(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metricsel: %w", err)
	}
	return fams, nil
}

// Sum adds up the series of s's family whose labels match (counters, gauges and
// untyped values). found is false when no series matches: the process does not export
// that counter (yet), which is not the same as a counter at 0.
//
// NAME_count and NAME_sum of a histogram or summary NAME are summed as exposed (the
// parser files them under NAME). A histogram or summary named itself has no one value:
// it is not found.
func (s Selector) Sum(fams map[string]*dto.MetricFamily) (sum float64, found bool) {
	mf, part := fams[s.Name], ""
	if mf == nil {
		for _, suffix := range []string{"_count", "_sum"} {
			if base, ok := strings.CutSuffix(s.Name, suffix); ok {
				switch fams[base].GetType() { // nil-safe: a missing base is a COUNTER
				case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM, dto.MetricType_SUMMARY:
					mf, part = fams[base], suffix
				}
			}
		}
	}
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if !s.matches(m) {
			continue
		}
		v, ok := value(m, part)
		if !ok {
			continue
		}
		found = true
		sum += v
	}
	return sum, found
}

// value is a series' value, or its histogram's or summary's _count or _sum (part).
func value(m *dto.Metric, part string) (float64, bool) {
	switch {
	case part == "_count" && m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount()), true
	case part == "_sum" && m.Histogram != nil:
		return m.GetHistogram().GetSampleSum(), true
	case part == "_count" && m.Summary != nil:
		return float64(m.GetSummary().GetSampleCount()), true
	case part == "_sum" && m.Summary != nil:
		return m.GetSummary().GetSampleSum(), true
	case part != "":
		return 0, false
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Untyped != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

func (s Selector) matches(m *dto.Metric) bool {
	for _, want := range s.Labels {
		ok := want.Value == "" // PromQL: label="" matches a series without the label
		for _, lp := range m.GetLabel() {
			if lp.GetName() == want.Name {
				ok = lp.GetValue() == want.Value
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
