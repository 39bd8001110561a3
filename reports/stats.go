package reports

import (
	"math"
	"math/rand/v2"
	"sort"

	"pdsoak/internal/nearest"
)

// Bootstrap settings for compare. The resamples are seeded, so a comparison of the same
// two ledgers always says the same thing.
const (
	DefaultResamples = 2000
	DefaultLevel     = 0.95
	// MaxBootstrapSamples bounds the per-request samples a bootstrap resamples: beyond
	// it a seeded uniform subsample of this size is used (the point estimates still use
	// every sample). One row (p50, p90 and p99 of one latency) then takes about 0.3 s on one core.
	MaxBootstrapSamples = 10000
	bootstrapSeed       = 0x5eed
)

// Interval is a confidence interval.
type Interval struct {
	Lo, Hi float64
}

// quantile is the nearest-rank q-quantile of sorted xs (the rule percentiles uses).
func quantile(sorted []float64, q float64) float64 {
	return nearest.Rank(sorted, q)
}

// BootstrapRelDiff is the percentile-bootstrap confidence interval (at level, e.g. 0.95)
// of (Q(new) - Q(base)) / Q(base), where Q is the nearest-rank q-quantile, from
// resamples independent resamples of each side. ok is false when either side has no
// samples or the base quantile is not positive.
func BootstrapRelDiff(base, new []float64, q float64, resamples int, level float64, seed uint64) (Interval, bool) {
	cis, oks := BootstrapRelDiffs(base, new, []float64{q}, resamples, level, seed)
	return cis[0], oks[0]
}

// BootstrapRelDiffs is BootstrapRelDiff for several quantiles from the same resamples
// (compare asks for p50, p90 and p99 of each latency at once).
//
// Each resample is drawn in O(n): on the sorted samples, the q-quantile of a resample
// is the value at the k-th smallest of n uniformly drawn indices, found by counting.
func BootstrapRelDiffs(base, new []float64, qs []float64, resamples int, level float64, seed uint64) ([]Interval, []bool) {
	cis, oks := make([]Interval, len(qs)), make([]bool, len(qs))
	if len(base) == 0 || len(new) == 0 || resamples <= 0 {
		return cis, oks
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := prepare(base, rng)
	n := prepare(new, rng)
	diffs := make([][]float64, len(qs))
	cb, cn := make([]int32, len(b)), make([]int32, len(n))
	qb, qn := make([]float64, len(qs)), make([]float64, len(qs))
	for range resamples {
		resampleQuantiles(b, qs, cb, qb, rng)
		resampleQuantiles(n, qs, cn, qn, rng)
		for i := range qs {
			if qb[i] > 0 {
				diffs[i] = append(diffs[i], (qn[i]-qb[i])/qb[i])
			}
		}
	}
	alpha := (1 - level) / 2
	for i, q := range qs {
		if quantile(b, q) <= 0 || len(diffs[i]) == 0 {
			continue
		}
		sort.Float64s(diffs[i])
		cis[i], oks[i] = Interval{Lo: quantile(diffs[i], alpha), Hi: quantile(diffs[i], 1-alpha)}, true
	}
	return cis, oks
}

// prepare sorts a copy of xs, subsampled to MaxBootstrapSamples.
func prepare(xs []float64, rng *rand.Rand) []float64 {
	var s []float64
	if len(xs) > MaxBootstrapSamples {
		s = make([]float64, MaxBootstrapSamples)
		for i := range s {
			s[i] = xs[rng.IntN(len(xs))]
		}
	} else {
		s = append([]float64(nil), xs...)
	}
	sort.Float64s(s)
	return s
}

// resampleQuantiles draws len(sorted) indices with replacement and puts the qs-quantiles
// (ascending) of the values they pick into out.
func resampleQuantiles(sorted []float64, qs []float64, counts []int32, out []float64, rng *rand.Rand) {
	clear(counts)
	n := len(sorted)
	for range n {
		counts[rng.IntN(n)]++
	}
	seen, i := 0, 0
	for j := range qs {
		k := max(1, int(math.Ceil(qs[j]*float64(n)))) // 1-based rank
		for i < n-1 && seen+int(counts[i]) < k {
			seen += int(counts[i])
			i++
		}
		out[j] = sorted[i]
	}
}

// TwoProportionZ is the two-proportion z-test of x1/n1 against x2/n2 with the pooled
// variance: the z statistic (positive when the second proportion is larger) and the
// two-sided p-value. With no variance (both 0 or both 1) z is 0 and p is 1.
func TwoProportionZ(x1, n1, x2, n2 int) (z, p float64) {
	if n1 == 0 || n2 == 0 {
		return 0, 1
	}
	p1, p2 := float64(x1)/float64(n1), float64(x2)/float64(n2)
	pool := float64(x1+x2) / float64(n1+n2)
	se := math.Sqrt(pool * (1 - pool) * (1/float64(n1) + 1/float64(n2)))
	if se == 0 {
		return 0, 1
	}
	z = (p2 - p1) / se
	return z, math.Erfc(math.Abs(z) / math.Sqrt2)
}

// BootstrapRelDiffsGrouped is BootstrapRelDiffs for samples that come in groups (a
// request's inter-token gaps): each resample draws whole groups with replacement, so
// gaps of one request go in or out together and their correlation widens the interval as
// it should. xs[ends[i-1]:ends[i]] is group i (ends[-1] is 0); nil ends: every sample is
// its own group (BootstrapRelDiffs). Each resample is O(samples + groups): the groups'
// draw counts weight the sorted samples, and one walk finds every quantile.
func BootstrapRelDiffsGrouped(base []float64, baseEnds []int, new []float64, newEnds []int, qs []float64, resamples int, level float64, seed uint64) ([]Interval, []bool) {
	if baseEnds == nil && newEnds == nil {
		return BootstrapRelDiffs(base, new, qs, resamples, level, seed)
	}
	cis, oks := make([]Interval, len(qs)), make([]bool, len(qs))
	if len(base) == 0 || len(new) == 0 || resamples <= 0 {
		return cis, oks
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := prepareGroups(base, baseEnds, rng)
	n := prepareGroups(new, newEnds, rng)
	diffs := make([][]float64, len(qs))
	wb, wn := make([]int32, b.groups), make([]int32, n.groups)
	qb, qn := make([]float64, len(qs)), make([]float64, len(qs))
	for range resamples {
		b.resample(qs, wb, qb, rng)
		n.resample(qs, wn, qn, rng)
		for i := range qs {
			if qb[i] > 0 {
				diffs[i] = append(diffs[i], (qn[i]-qb[i])/qb[i])
			}
		}
	}
	alpha := (1 - level) / 2
	for i, q := range qs {
		if quantile(b.vals, q) <= 0 || len(diffs[i]) == 0 {
			continue
		}
		sort.Float64s(diffs[i])
		cis[i], oks[i] = Interval{Lo: quantile(diffs[i], alpha), Hi: quantile(diffs[i], 1-alpha)}, true
	}
	return cis, oks
}

// groupedSamples are samples sorted by value, each with the index of its group.
type groupedSamples struct {
	vals   []float64
	group  []int32
	sizes  []int
	groups int
}

// prepareGroups sorts the samples keeping their groups. Beyond MaxBootstrapSamples
// samples, a seeded uniform draw of whole groups (with replacement) is kept until it holds
// that many samples, as prepare does for single samples.
func prepareGroups(xs []float64, ends []int, rng *rand.Rand) groupedSamples {
	if ends == nil {
		ends = make([]int, len(xs))
		for i := range ends {
			ends[i] = i + 1
		}
	}
	from := func(g int) int {
		if g == 0 {
			return 0
		}
		return ends[g-1]
	}
	pick := make([]int, 0, len(ends))
	if len(xs) > MaxBootstrapSamples {
		for total := 0; total < MaxBootstrapSamples; {
			g := rng.IntN(len(ends))
			pick = append(pick, g)
			total += ends[g] - from(g)
		}
	} else {
		for g := range ends {
			pick = append(pick, g)
		}
	}
	type tagged struct {
		v float64
		g int32
	}
	var all []tagged
	s := groupedSamples{sizes: make([]int, len(pick)), groups: len(pick)}
	for i, g := range pick {
		for _, v := range xs[from(g):ends[g]] {
			all = append(all, tagged{v, int32(i)})
		}
		s.sizes[i] = ends[g] - from(g)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	s.vals, s.group = make([]float64, len(all)), make([]int32, len(all))
	for i, t := range all {
		s.vals[i], s.group[i] = t.v, t.g
	}
	return s
}

// resample draws s.groups groups with replacement and puts the qs-quantiles (ascending)
// of the samples they hold, each counted as often as its group was drawn, into out.
func (s groupedSamples) resample(qs []float64, weight []int32, out []float64, rng *rand.Rand) {
	clear(weight)
	total := 0
	for range s.groups {
		g := rng.IntN(s.groups)
		weight[g]++
		total += s.sizes[g]
	}
	seen, i := 0, 0
	for j := range qs {
		k := max(1, int(math.Ceil(qs[j]*float64(total)))) // 1-based rank among the drawn samples
		for i < len(s.vals)-1 && seen+int(weight[s.group[i]]) < k {
			seen += int(weight[s.group[i]])
			i++
		}
		out[j] = s.vals[i]
	}
}
