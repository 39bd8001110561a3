package nearest

import (
	"cmp"
	"math"
)

// Index is the index of the nearest-rank q-quantile among n sorted values (n > 0):
// ceil(q·n) − 1, clamped to [0, n−1].
func Index(n int, q float64) int {
	i := int(math.Ceil(q*float64(n))) - 1
	return max(0, min(i, n-1))
}

// Rank is the nearest-rank q-quantile of sorted, which must be sorted and not empty.
func Rank[T cmp.Ordered](sorted []T, q float64) T {
	return sorted[Index(len(sorted), q)]
}
