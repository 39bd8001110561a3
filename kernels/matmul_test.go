package kernels

import (
	"math"
	"testing"
)

func TestMatMulTAgainstFloat64(t *testing.T) {
	tests := []struct {
		name    string
		m, n, k int
	}{
		{"single", 1, 1, 8},
		{"decode row", 1, 128, 128},
		{"odd everything", 3, 7, 13},
		{"tile edges", 5, 70, 24},
		{"parallel", 64, 256, 128},
		{"k below a lane", 2, 9, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := randSlice(tt.m*tt.k, 3)
			b := randSlice(tt.n*tt.k, 4)
			c := make([]float32, tt.m*tt.n)
			MatMulT(c, a, b, tt.m, tt.n, tt.k)
			want := make([]float64, tt.m*tt.n)
			for i := range tt.m {
				for j := range tt.n {
					for kk := range tt.k {
						want[i*tt.n+j] += float64(a[i*tt.k+kk]) * float64(b[j*tt.k+kk])
					}
				}
			}
			if e := relErr(c, want); e > 1e-6 || math.IsNaN(e) {
				t.Fatalf("relative error %.3g", e)
			}
			// Each element is exactly the lane-8 dot product of its row and column.
			for i := range tt.m {
				for j := range tt.n {
					if got, w := c[i*tt.n+j], dotGo(a[i*tt.k:(i+1)*tt.k], b[j*tt.k:(j+1)*tt.k]); got != w {
						t.Fatalf("c[%d][%d] = %v, lane-8 dot = %v", i, j, got, w)
					}
				}
			}
		})
	}
}

// TestMatMulTRowInvariance multiplies the same row alone, in batches of every size up to
// 40 (so it lands in every tile position), and with 1 or many goroutines.
func TestMatMulTRowInvariance(t *testing.T) {
	for _, k := range []int{128, 384, 20} {
		const n = 264
		b := randSlice(n*k, 5)
		row := randSlice(k, 6)
		alone := make([]float32, n)
		MatMulT(alone, row, b, 1, n, k)
		for _, workers := range []int{1, 0} {
			for m := 1; m <= 40; m++ {
				a := randSlice(m*k, uint64(m))
				at := (m * 7) % m
				copy(a[at*k:], row)
				c := make([]float32, m*n)
				if workers == 0 {
					MatMulT(c, a, b, m, n, k)
				} else {
					matMulTWorkers(c, a, b, m, n, k, workers)
				}
				for j := range n {
					if c[at*n+j] != alone[j] {
						t.Fatalf("k=%d m=%d workers=%d: row at %d col %d = %v, alone %v", k, m, workers, at, j, c[at*n+j], alone[j])
					}
				}
			}
		}
	}
}

func TestAssemblyMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	for _, k := range []int{8, 16, 32, 128, 136, 1024} {
		x := randSlice(k, uint64(k))
		y := randSlice(k, uint64(k)+1)
		if a, g := dotAVX(&x[0], &y[0], k), dotGo(x, y); a != g {
			t.Fatalf("k=%d: dotAVX %v, dotGo %v", k, a, g)
		}
		w := randSlice(5, 11)
		ld := k + 8
		rows := randSlice(5*ld, 12)
		ya, yg := randSlice(k, 9), randSlice(k, 9)
		accumAVX(&ya[0], &w[0], &rows[0], ld, 5, k)
		for j := range 5 {
			for d := range yg {
				yg[d] += float32(w[j] * rows[j*ld+d])
			}
		}
		for i := range ya {
			if ya[i] != yg[i] {
				t.Fatalf("k=%d: accum differs at %d", k, i)
			}
		}
		got, got0, got1 := make([]float32, 5), make([]float32, 5), make([]float32, 5)
		dotRows(got, x, rows, ld)
		dotRows2(got0, got1, x, y, rows, ld)
		for j := range 5 {
			if want := dotGo(x, rows[j*ld:j*ld+k]); got[j] != want || got0[j] != want {
				t.Fatalf("k=%d: dotRows[%d] = %v, dotRows2 %v, want %v", k, j, got[j], got0[j], want)
			}
			if want := dotGo(y, rows[j*ld:j*ld+k]); got1[j] != want {
				t.Fatalf("k=%d: dotRows2 second query [%d] = %v, want %v", k, j, got1[j], want)
			}
		}
	}
}

func TestMatMulTPanicsOnShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	MatMulT(make([]float32, 3), make([]float32, 4), make([]float32, 4), 2, 2, 2)
}
