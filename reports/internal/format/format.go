package format

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Seconds is a duration in seconds, to the millisecond ("1.235s").
func Seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// SecondsMicro is a duration in seconds to the microsecond, for compare's absolute
// floors (Seconds rounds to milliseconds).
func SecondsMicro(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

// Figure is a compared figure with its unit; a negative time is a fault that never
// recovered ("never").
func Figure(v float64, unit string) string {
	switch {
	case unit == "s" && v < 0:
		return "never"
	case unit == "s":
		return fmt.Sprintf("%.4g s", v)
	case unit != "":
		return fmt.Sprintf("%.4g %s", v, unit)
	}
	return fmt.Sprintf("%.4g", v)
}

// Pct is a fraction as a percentage with one decimal ("97.5%").
func Pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) + "%" }

// Plural is a count and its noun ("1 request", "3 requests").
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// OrNone quotes s, or says "(none)" when it is empty.
func OrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

// FirstNonEmpty is a unless it is empty, else b.
func FirstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// SortedKeys lists a map's keys in order (workloads, causes, metrics by name).
func SortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ShortMetric drops a gauge's "sglang:" / "vllm:" prefix for a chart title.
func ShortMetric(name string) string {
	if i := strings.IndexByte(name, ':'); i >= 0 {
		return name[i+1:]
	}
	return name
}
