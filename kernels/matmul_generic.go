//go:build !amd64 || purego

package kernels

// useAVX2 is false where there are no assembly kernels; the Go code computes the same bits.
const useAVX2 = false

func dotAVX(a, b *float32, k int) float32                        { panic("kernels: no AVX2 kernels") }
func kern1x4AVX(a0, b *float32, ldb, k int, c0 *float32)         { panic("kernels: no AVX2 kernels") }
func kern2x4AVX(a0, a1, b *float32, ldb, k int, c0, c1 *float32) { panic("kernels: no AVX2 kernels") }

func accumAVX(y, w, v *float32, ldv, npos, hd int) { panic("kernels: no AVX2 kernels") }
