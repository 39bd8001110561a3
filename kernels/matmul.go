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
// Batch invariance: every c[i][j] is reduced over kk in the same order, from zero, one
// product at a time, whatever m, n, the tile it falls in, or the number of goroutines.
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
	workers := matmulWorkers(m, n, k)
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

// maxMatmulWorkers caps the goroutines of one product; 0 means GOMAXPROCS.
var maxMatmulWorkers = 0

func matmulWorkers(m, n, k int) int {
	if m*n*k < parallelMinMACs || n < 2*colTile {
		return 1
	}
	w := runtime.GOMAXPROCS(0)
	if maxMatmulWorkers > 0 {
		w = min(w, maxMatmulWorkers)
	}
	return max(1, min(w, n/colTile))
}

const (
	rowTile   = 2  // rows of a per micro-kernel
	colTile   = 4  // rows of b per micro-kernel
	colBlockB = 64 // rows of b kept hot in cache while every row of a passes over them
)

// matmulRange computes columns [j0, j1) of c.
func matmulRange(c, a, b []float32, m, n, k, j0, j1 int) {
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
				kernel2x4(c0[j:j+4], c1[j:j+4], a0, a1, b[j*k:(j+4)*k], k)
			}
			for ; j < je; j++ {
				bj := b[j*k : j*k+k]
				c0[j] = dot(a0, bj)
				c1[j] = dot(a1, bj)
			}
		}
		for ; i < m; i++ {
			a0 := a[i*k : i*k+k]
			c0 := c[i*n : i*n+n]
			j := jb
			for ; j+colTile <= je; j += colTile {
				kernel1x4(c0[j:j+4], a0, b[j*k:(j+4)*k], k)
			}
			for ; j < je; j++ {
				c0[j] = dot(a0, b[j*k:j*k+k])
			}
		}
	}
}

// The kernels below all reduce one output element the same way: s starts at 0 and adds
// float32(x*y) for kk = 0, 1, ..., k-1. The explicit conversion forbids the compiler from
// fusing the multiply and add differently in different kernels.

func dot(x, y []float32) float32 {
	y = y[:len(x)]
	var s float32
	for i, xv := range x {
		s += float32(xv * y[i])
	}
	return s
}

func kernel1x4(c, a0, b []float32, k int) {
	b0 := b[0*k : 1*k]
	b1 := b[1*k : 2*k]
	b2 := b[2*k : 3*k]
	b3 := b[3*k : 4*k]
	a0 = a0[:k]
	var s0, s1, s2, s3 float32
	for kk := range a0 {
		x := a0[kk]
		s0 += float32(x * b0[kk])
		s1 += float32(x * b1[kk])
		s2 += float32(x * b2[kk])
		s3 += float32(x * b3[kk])
	}
	c = c[:4]
	c[0], c[1], c[2], c[3] = s0, s1, s2, s3
}

func kernel2x4(c0, c1, a0, a1, b []float32, k int) {
	b0 := b[0*k : 1*k]
	b1 := b[1*k : 2*k]
	b2 := b[2*k : 3*k]
	b3 := b[3*k : 4*k]
	a0 = a0[:k]
	a1 = a1[:k]
	var s00, s01, s02, s03, s10, s11, s12, s13 float32
	for kk := range a0 {
		x, y := a0[kk], a1[kk]
		w0, w1, w2, w3 := b0[kk], b1[kk], b2[kk], b3[kk]
		s00 += float32(x * w0)
		s01 += float32(x * w1)
		s02 += float32(x * w2)
		s03 += float32(x * w3)
		s10 += float32(y * w0)
		s11 += float32(y * w1)
		s12 += float32(y * w2)
		s13 += float32(y * w3)
	}
	c0 = c0[:4]
	c1 = c1[:4]
	c0[0], c0[1], c0[2], c0[3] = s00, s01, s02, s03
	c1[0], c1[1], c1[2], c1[3] = s10, s11, s12, s13
}
