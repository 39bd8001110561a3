// Package nearest is the project's one percentile rule, the nearest rank: the
// q-quantile of n sorted values is the value at index ceil(q·n) − 1. Reports, the
// self-check and every other percentile call it, so a p99 means the same everywhere.
//
//	sort.Float64s(xs)
//	p99 := nearest.Rank(xs, 0.99)
package nearest
