package kernels

import (
	"fmt"
	"runtime"
	"sync"
)

// MatMulT computes c = a · bᵀ for row-major a (m×k), b (n×k) and c (m×n):
//
//	c[i*n+j] = Σ_kk a[i*k+kk] · b[j*k+kk]
//
// b is a weight matrix stored as one row per output feature, as a linear layer keeps it.
//
// Batch invariance: every c[i][j] is the lane-8 dot product of its row and column (see
// dotGo), whatever m, n, the tile it falls in, the number of goroutines, or whether the
// AVX2 kernels run (on amd64 without the purego tag, when k is a multiple of 8).
// Work is split across goroutines only along n (output features), never along k. A row
// of a therefore gives bit-identical outputs whether it is multiplied alone or with 31
// other rows, which is what makes a request's tokens independent of its batch.
func MatMulT(c, a, b []float32, m, n, k int) {
	if m < 0 || n < 0 || k < 0 || len(a) < m*k || len(b) < n*k || len(c) < m*n {
		panic(fmt.Sprintf("kernels: MatMulT shapes m=%d n=%d k=%d with len(a)=%d len(b)=%d len(c)=%d",
			m, n, k, len(a), len(b), len(c)))
	}
	if m == 0 || n == 0 {
		return
	}
	matMulTWorkers(c, a, b, m, n, k, matmulWorkers(m, n, k))
}

// matMulTWorkers is MatMulT over at most workers goroutines (tests pin it to 1).
func matMulTWorkers(c, a, b []float32, m, n, k, workers int) {
	if workers <= 1 {
		matmulRange(c, a, b, m, n, k, 0, n)
		return
	}
	// Split n into chunks that are multiples of the column tile.
	chunk := (n + workers - 1) / workers
	chunk = (chunk + colTile - 1) / colTile * colTile
	var wg sync.WaitGroup
	for j0 := 0; j0 < n; j0 += chunk {
		j1 := min(j0+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			matmulRange(c, a, b, m, n, k, j0, j1)
		}()
	}
	wg.Wait()
}

// parallelMinMACs is the smallest product that is worth handing to several goroutines.
const parallelMinMACs = 1 << 18

func matmulWorkers(m, n, k int) int {
	if m*n*k < parallelMinMACs || n < 2*colTile {
		return 1
	}
	return max(1, min(runtime.GOMAXPROCS(0), n/colTile))
}

const (
	rowTile   = 2  // rows of a per micro-kernel
	colTile   = 4  // rows of b per micro-kernel
	colBlockB = 64 // rows of b kept hot in cache while every row of a passes over them
)

// matmulRange computes columns [j0, j1) of c.
func matmulRange(c, a, b []float32, m, n, k, j0, j1 int) {
	if !useAVX2 || k == 0 || k%8 != 0 {
		for i := 0; i < m; i++ {
			ai := a[i*k : i*k+k]
			ci := c[i*n : i*n+n]
			for j := j0; j < j1; j++ {
				ci[j] = dotGo(ai, b[j*k:j*k+k])
			}
		}
		return
	}
	for jb := j0; jb < j1; jb += colBlockB {
		je := min(jb+colBlockB, j1)
		i := 0
		for ; i+rowTile <= m; i += rowTile {
			a0 := a[i*k : i*k+k]
			a1 := a[(i+1)*k : (i+1)*k+k]
			c0 := c[i*n : i*n+n]
			c1 := c[(i+1)*n : (i+1)*n+n]
			j := jb
			for ; j+colTile <= je; j += colTile {
				_ = b[(j+colTile)*k-1]
				kern2x4AVX(&a0[0], &a1[0], &b[j*k], k, k, &c0[j], &c1[j])
			}
			for ; j < je; j++ {
				c0[j] = dotAVX(&a0[0], &b[j*k], k)
				c1[j] = dotAVX(&a1[0], &b[j*k], k)
			}
		}
		for ; i < m; i++ {
			a0 := a[i*k : i*k+k]
			c0 := c[i*n : i*n+n]
			j := jb
			for ; j+colTile <= je; j += colTile {
				_ = b[(j+colTile)*k-1]
				kern1x4AVX(&a0[0], &b[j*k], k, k, &c0[j])
			}
			for ; j < je; j++ {
				c0[j] = dotAVX(&a0[0], &b[j*k], k)
			}
		}
	}
}

// Every dot product in this package has one summation order, the lane-8 order: eight
// partial sums, lane l adding float32(x[i]·y[i]) for i ≡ l (mod 8) in increasing i, then
//
//	((L0+L4) + (L2+L6)) + ((L1+L5) + (L3+L7))
//
// The AVX2 kernels (matmul_amd64.s) and dotGo compute exactly this, with separate
// multiply and add roundings (the explicit float32 conversions forbid fused
// multiply-adds), so results are the same bits with or without assembly and on any CPU.

// dotGo is the portable lane-8 dot product. A tail shorter than 8 is added into lanes
// 0, 1, ... before the lanes are reduced.
func dotGo(x, y []float32) float32 {
	y = y[:len(x)]
	var l0, l1, l2, l3, l4, l5, l6, l7 float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		xs, ys := x[i:i+8:i+8], y[i:i+8:i+8]
		l0 += float32(xs[0] * ys[0])
		l1 += float32(xs[1] * ys[1])
		l2 += float32(xs[2] * ys[2])
		l3 += float32(xs[3] * ys[3])
		l4 += float32(xs[4] * ys[4])
		l5 += float32(xs[5] * ys[5])
		l6 += float32(xs[6] * ys[6])
		l7 += float32(xs[7] * ys[7])
	}
	if i < len(x) {
		var t [8]float32
		for l := range len(x) - i {
			t[l] = float32(x[i+l] * y[i+l])
		}
		l0 += t[0]
		l1 += t[1]
		l2 += t[2]
		l3 += t[3]
		l4 += t[4]
		l5 += t[5]
		l6 += t[6]
		l7 += t[7]
	}
	return ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
}

// accum adds Σ_j w[j]·v[j*ldv : j*ldv+len(y)] to y, adding the rows in order of j.
func accum(y, w, v []float32, ldv int) {
	if len(w) == 0 || len(y) == 0 {
		return
	}
	_ = v[(len(w)-1)*ldv+len(y)-1]
	if useAVX2 && len(y)%8 == 0 {
		accumAVX(&y[0], &w[0], &v[0], ldv, len(w), len(y))
		return
	}
	for j, wj := range w {
		vj := v[j*ldv : j*ldv+len(y)]
		for d := range y {
			y[d] += float32(wj * vj[d])
		}
	}
}

// dotRows writes dst[t] = dot(x, rows[t*ld : t*ld+len(x)]) for t < len(dst): one query
// against several keys, four at a time, each in the lane-8 order.
func dotRows(dst, x, rows []float32, ld int) {
	k := len(x)
	if len(dst) == 0 {
		return
	}
	_ = rows[(len(dst)-1)*ld+k-1]
	if !useAVX2 || k == 0 || k%8 != 0 {
		for t := range dst {
			dst[t] = dotGo(x, rows[t*ld:t*ld+k])
		}
		return
	}
	t := 0
	for ; t+4 <= len(dst); t += 4 {
		kern1x4AVX(&x[0], &rows[t*ld], ld, k, &dst[t])
	}
	for ; t < len(dst); t++ {
		dst[t] = dotAVX(&x[0], &rows[t*ld], k)
	}
}

// dotRows2 is dotRows for two queries against the same keys (two heads of one KV group),
// reading each key once.
func dotRows2(dst0, dst1, x0, x1, rows []float32, ld int) {
	k := len(x0)
	if !useAVX2 || k == 0 || k%8 != 0 || len(dst0) == 0 {
		dotRows(dst0, x0, rows, ld)
		dotRows(dst1, x1, rows, ld)
		return
	}
	_ = rows[(len(dst0)-1)*ld+k-1]
	_ = x1[k-1]
	dst1 = dst1[:len(dst0)]
	t := 0
	for ; t+4 <= len(dst0); t += 4 {
		kern2x4AVX(&x0[0], &x1[0], &rows[t*ld], ld, k, &dst0[t], &dst1[t])
	}
	for ; t < len(dst0); t++ {
		dst0[t] = dotAVX(&x0[0], &rows[t*ld], k)
		dst1[t] = dotAVX(&x1[0], &rows[t*ld], k)
	}
}
