package reports

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTwoProportionZ(t *testing.T) {
	tests := []struct {
		name           string
		x1, n1, x2, n2 int
		z, p           float64
	}{
		// Textbook: 50/100 vs 60/100, pooled 0.55: z = 0.1/sqrt(0.55*0.45*0.02) = 1.4213, p = 0.1552.
		{name: "50% vs 60% of 100", x1: 50, n1: 100, x2: 60, n2: 100, z: 1.4213, p: 0.1552},
		// 10/1000 vs 30/1000: pooled 0.02, se 0.006261, z = 3.1944, p = 0.0014.
		{name: "1% vs 3% of 1000", x1: 10, n1: 1000, x2: 30, n2: 1000, z: 3.1944, p: 0.0014},
		{name: "decrease is negative", x1: 30, n1: 1000, x2: 10, n2: 1000, z: -3.1944, p: 0.0014},
		{name: "no variance", x1: 0, n1: 10, x2: 0, n2: 20, z: 0, p: 1},
		{name: "empty side", x1: 0, n1: 0, x2: 3, n2: 20, z: 0, p: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z, p := TwoProportionZ(tt.x1, tt.n1, tt.x2, tt.n2)
			assert.InDelta(t, tt.z, z, 1e-4)
			assert.InDelta(t, tt.p, p, 1e-4)
		})
	}
}

func normal(n int, mean, sd float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = mean + sd*rng.NormFloat64()
	}
	return xs
}

func TestBootstrapRelDiff(t *testing.T) {
	base := normal(2000, 1.0, 0.1, 1)
	tests := []struct {
		name   string
		new    []float64
		q      float64
		lo, hi float64 // the interval must lie within [lo, hi] and contain truth
		truth  float64
	}{
		// Same distribution: the median's relative difference is 0, and with n = 2000
		// and sd/mean = 0.1 its 95% interval is about ±0.8%.
		{name: "same distribution, median", new: normal(2000, 1.0, 0.1, 2), q: 0.5, lo: -0.02, hi: 0.02, truth: 0},
		{name: "four times slower, median", new: normal(2000, 4.0, 0.4, 3), q: 0.5, lo: 2.9, hi: 3.1, truth: 3},
		// p99 of N(1, 0.1) is 1.2326, of N(1.2, 0.1) 1.4326: +16.2%.
		{name: "shifted, p99", new: normal(2000, 1.2, 0.1, 4), q: 0.99, lo: 0.10, hi: 0.23, truth: 0.162},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ci, ok := BootstrapRelDiff(base, tt.new, tt.q, DefaultResamples, DefaultLevel, 7)
			require.True(t, ok)
			assert.LessOrEqual(t, ci.Lo, ci.Hi)
			assert.GreaterOrEqual(t, ci.Lo, tt.lo, "%+v", ci)
			assert.LessOrEqual(t, ci.Hi, tt.hi, "%+v", ci)
			assert.True(t, ci.Lo <= tt.truth && tt.truth <= ci.Hi, "%+v does not contain %g", ci, tt.truth)
			again, _ := BootstrapRelDiff(base, tt.new, tt.q, DefaultResamples, DefaultLevel, 7)
			assert.Equal(t, ci, again, "seeded: the same inputs give the same interval")
		})
	}
	_, ok := BootstrapRelDiff(nil, base, 0.5, 100, 0.95, 1)
	assert.False(t, ok, "no base samples")
	_, ok = BootstrapRelDiff([]float64{0, 0}, base, 0.5, 100, 0.95, 1)
	assert.False(t, ok, "zero base quantile")
}

// TestBootstrapCoverage: over many independent pairs of samples from one distribution,
// the 95% interval of the median's difference contains 0 about 95% of the time.
func TestBootstrapCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("200 bootstraps")
	}
	hits := 0
	const trials = 200
	for i := range trials {
		b := normal(300, 1, 0.2, uint64(100+2*i))
		n := normal(300, 1, 0.2, uint64(101+2*i))
		ci, ok := BootstrapRelDiff(b, n, 0.5, 500, 0.95, uint64(i))
		require.True(t, ok)
		if ci.Lo <= 0 && 0 <= ci.Hi {
			hits++
		}
	}
	cover := float64(hits) / trials
	assert.True(t, cover > 0.88 && cover <= 1, "coverage %.3f", cover)
	assert.False(t, math.IsNaN(cover))
}

func TestBootstrapSubsamples(t *testing.T) {
	big := normal(3*MaxBootstrapSamples, 1, 0.1, 9)
	ci, ok := BootstrapRelDiff(big, big, 0.9, 200, 0.95, 3)
	require.True(t, ok)
	assert.True(t, ci.Lo <= 0 && 0 <= ci.Hi, "%+v", ci)
}

// BenchmarkBootstrapRelDiff: one latency (p50, p90, p99) of compare at the subsample cap.
func BenchmarkBootstrapRelDiff(b *testing.B) {
	base := normal(MaxBootstrapSamples, 1, 0.1, 1)
	new := normal(MaxBootstrapSamples, 1.1, 0.1, 2)
	for b.Loop() {
		BootstrapRelDiffs(base, new, []float64{0.5, 0.9, 0.99}, DefaultResamples, DefaultLevel, 1)
	}
}

// TestBootstrapRelDiffsSeveralQuantiles: one set of resamples serves every quantile.
func TestBootstrapRelDiffsSeveralQuantiles(t *testing.T) {
	base, shifted := normal(4000, 1.0, 0.1, 11), normal(4000, 1.2, 0.1, 12)
	// Median: 1.2/1.0 - 1 = +20%; p90: 1.3282/1.1282 - 1 = +17.7%; p99: +16.2%.
	truth := []float64{0.2, 0.177, 0.162}
	cis, oks := BootstrapRelDiffs(base, shifted, []float64{0.5, 0.9, 0.99}, DefaultResamples, DefaultLevel, 5)
	for i := range truth {
		require.True(t, oks[i])
		assert.True(t, cis[i].Lo <= truth[i] && truth[i] <= cis[i].Hi, "q%d: %+v does not contain %g", i, cis[i], truth[i])
		assert.Less(t, cis[i].Hi-cis[i].Lo, 0.1, "q%d: %+v", i, cis[i])
	}
}

// correlatedITL makes n requests of k gaps each: every request has its own speed (a
// lognormal level) and its gaps stay within 1% of it, as tokens of one stream do.
func correlatedITL(rng *rand.Rand, n, k int) ([]float64, []int) {
	var xs []float64
	var ends []int
	for range n {
		level := 0.02 * math.Exp(0.5*rng.NormFloat64())
		for range k {
			xs = append(xs, level*(1+0.01*rng.NormFloat64()))
		}
		ends = append(ends, len(xs))
	}
	return xs, ends
}

// TestGroupedBootstrapWiderOnCorrelatedData: resampling whole requests gives a wider
// interval than resampling gaps one by one when a request's gaps are correlated (the
// per-gap bootstrap takes 100 gaps of one request for 100 independent samples), and the
// same interval when every group holds one sample.
func TestGroupedBootstrapWiderOnCorrelatedData(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base, be := correlatedITL(rng, 60, 100)
	new, ne := correlatedITL(rng, 60, 100)
	qs := []float64{0.5, 0.9, 0.99}
	perGap, okG := BootstrapRelDiffs(base, new, qs, 500, 0.95, 7)
	perReq, okR := BootstrapRelDiffsGrouped(base, be, new, ne, qs, 500, 0.95, 7)
	for i, q := range qs {
		require.True(t, okG[i] && okR[i], "q%v", q)
		wg, wr := perGap[i].Hi-perGap[i].Lo, perReq[i].Hi-perReq[i].Lo
		assert.Greater(t, wr, 2*wg, "q%v: per-request interval %v should be much wider than per-gap %v", q, perReq[i], perGap[i])
		assert.True(t, perReq[i].Lo < 0 && perReq[i].Hi > 0, "q%v: same distribution, the interval %v holds 0", q, perReq[i])
	}

	t.Run("groups of one are the per-sample bootstrap's distribution", func(t *testing.T) {
		xs := make([]float64, 2000)
		ys := make([]float64, 2000)
		for i := range xs {
			xs[i], ys[i] = rng.ExpFloat64(), rng.ExpFloat64()
		}
		ones := func(n int) []int {
			e := make([]int, n)
			for i := range e {
				e[i] = i + 1
			}
			return e
		}
		a, _ := BootstrapRelDiffs(xs, ys, qs, 1000, 0.95, 3)
		b, _ := BootstrapRelDiffsGrouped(xs, ones(len(xs)), ys, ones(len(ys)), qs, 1000, 0.95, 3)
		for i := range qs {
			assert.InDelta(t, a[i].Hi-a[i].Lo, b[i].Hi-b[i].Lo, 0.35*(a[i].Hi-a[i].Lo), "q%v", qs[i])
		}
	})

	t.Run("the subsample cap keeps whole requests", func(t *testing.T) {
		big, ends := correlatedITL(rng, 400, 100) // 40,000 gaps > MaxBootstrapSamples
		s := prepareGroups(big, ends, rand.New(rand.NewPCG(1, 1)))
		assert.GreaterOrEqual(t, len(s.vals), MaxBootstrapSamples)
		assert.Less(t, len(s.vals), MaxBootstrapSamples+100)
		for _, n := range s.sizes {
			assert.Equal(t, 100, n)
		}
	})
}
