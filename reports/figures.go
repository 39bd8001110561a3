package reports

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"pdsoak/internal/nearest"
	"pdsoak/reports/internal/format"
)

func formatMetrics(m map[string]float64) string {
	if len(m) == 0 {
		return ""
	}
	keys := format.SortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%g", k, m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// Float returns a pointer to v.
func Float(v float64) *float64 { return &v }

func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	rank := func(p float64) float64 { return nearest.Rank(s, p) }
	return Percentiles{
		Count: len(s),
		P50:   round(rank(0.50)),
		P90:   round(rank(0.90)),
		P95:   round(rank(0.95)),
		P99:   round(rank(0.99)),
		Max:   round(s[len(s)-1]),
		Mean:  round(sum / float64(len(s))),
	}
}

// round keeps microsecond precision so reports are stable across platforms.
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }
