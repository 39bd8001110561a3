package kernels

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Matmul benchmarks compare MatMulT with gonum's blas32 Sgemm and a naive triple loop on
// the same shapes, in the same run. Each reports GFLOP/s (2·m·n·k per product).

type mmShape struct {
	name    string
	m, n, k int
}

var mmShapes = []mmShape{
	{"512x512x512", 512, 512, 512},
	{"decode-b1-d128", 1, 128, 128},
	{"decode-b8-d128", 8, 128, 128},
	{"decode-b32-d128", 32, 128, 128},
	{"decode-b1-d1024", 1, 1024, 1024},
	{"decode-b8-d1024", 8, 1024, 1024},
	{"decode-b32-d1024", 32, 1024, 1024},
}

func randSlice(n int, seed uint64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = signedUnit(hash2(seed, uint64(i)))
	}
	return s
}

// naiveMatMul is the textbook i-j-k loop over a row-major k×n right-hand side.
func naiveMatMul(c, a, bkn []float32, m, n, k int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float32
			for kk := 0; kk < k; kk++ {
				s += a[i*k+kk] * bkn[kk*n+j]
			}
			c[i*n+j] = s
		}
	}
}

func gonumMatMulT(c, a, b []float32, m, n, k int) {
	blas32.Gemm(blas.NoTrans, blas.Trans, 1,
		blas32.General{Rows: m, Cols: k, Stride: k, Data: a},
		blas32.General{Rows: n, Cols: k, Stride: k, Data: b},
		0, blas32.General{Rows: m, Cols: n, Stride: n, Data: c})
}

var mmImpls = []struct {
	name string
	fn   func(c, a, b []float32, m, n, k int)
}{
	{"pdsoak", MatMulT},
	{"gonum", gonumMatMulT},
	{"naive", naiveMatMul},
}

func BenchmarkMatMul(b *testing.B) {
	for _, sh := range mmShapes {
		a := randSlice(sh.m*sh.k, 1)
		w := randSlice(sh.n*sh.k, 2)
		c := make([]float32, sh.m*sh.n)
		for _, impl := range mmImpls {
			b.Run(sh.name+"/"+impl.name, func(b *testing.B) {
				for b.Loop() {
					impl.fn(c, a, w, sh.m, sh.n, sh.k)
				}
				b.ReportMetric(2*float64(sh.m*sh.n*sh.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMatMulRatio times MatMulT and the baselines back to back on each shape and
// reports MatMulT's speed as a multiple of each baseline's, measured in the same run.
func BenchmarkMatMulRatio(b *testing.B) {
	for _, sh := range mmShapes {
		a := randSlice(sh.m*sh.k, 1)
		w := randSlice(sh.n*sh.k, 2)
		c := make([]float32, sh.m*sh.n)
		reps := max(1, (1<<24)/(sh.m*sh.n*sh.k))
		timeIt := func(fn func(c, a, b []float32, m, n, k int)) time.Duration {
			start := time.Now()
			for range reps {
				fn(c, a, w, sh.m, sh.n, sh.k)
			}
			return time.Since(start)
		}
		b.Run(sh.name, func(b *testing.B) {
			var ours, gonum, naive time.Duration
			for b.Loop() {
				ours += timeIt(MatMulT)
				gonum += timeIt(gonumMatMulT)
				naive += timeIt(naiveMatMul)
			}
			b.ReportMetric(float64(gonum)/float64(ours), "x_gonum")
			b.ReportMetric(float64(naive)/float64(ours), "x_naive")
		})
	}
}

// BenchmarkDecode measures tinyref decode throughput: one step for every sequence of the
// batch per iteration, each sequence with 64 to 256 tokens of context.
func BenchmarkDecode(b *testing.B) {
	for _, bs := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("batch=%d", bs), func(b *testing.B) {
			m := newTiny(b, func(c *Config) { c.NumPages = bs * 16 })
			batch := make([]SeqInput, bs)
			out := make([]int, bs)
			for i := range batch {
				batch[i] = SeqInput{Tokens: promptIDs(i, 64), Pages: pagesFor(i*16, 16), Sample: true}
			}
			require.NoError(b, m.Forward(batch, out))
			step := 0
			for b.Loop() {
				for i := range batch {
					batch[i].Tokens = out[i : i+1]
					if out[i] < 0 {
						batch[i].Tokens = []int{'a'}
					}
					batch[i].Pos = 64 + step%192
				}
				require.NoError(b, m.Forward(batch, out))
				step++
			}
			b.ReportMetric(float64(bs*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkPrefill measures tinyref prefill of one 512-token prompt per iteration.
func BenchmarkPrefill(b *testing.B) {
	const n = 512
	m := newTiny(b, func(c *Config) { c.NumPages = 64 })
	in := []SeqInput{{Tokens: promptIDs(1, n), Pages: pagesFor(0, n/16), Sample: true}}
	out := []int{0}
	for b.Loop() {
		require.NoError(b, m.Forward(in, out))
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkSimTimeDecode measures simtime's cost per step (hashing every KV byte of each
// sequence) for 32 sequences of 2048 tokens.
func BenchmarkSimTimeDecode(b *testing.B) {
	const bs, ctx = 32, 2048
	s := newSim(b, func(c *Config) { c.NumPages = bs * (ctx/16 + 1) })
	batch := make([]SeqInput, bs)
	out := make([]int, bs)
	for i := range batch {
		batch[i] = SeqInput{Tokens: promptIDs(i, ctx), Pages: pagesFor(i*(ctx/16+1), ctx/16+1)}
	}
	require.NoError(b, s.Forward(batch, out))
	for i := range batch {
		batch[i].Tokens, batch[i].Pos, batch[i].Sample = []int{'a'}, ctx, true
	}
	for b.Loop() {
		require.NoError(b, s.Forward(batch, out))
	}
	b.ReportMetric(float64(bs*b.N)/b.Elapsed().Seconds(), "tok/s")
}
