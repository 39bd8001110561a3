//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels; they give the same bits as the Go ones.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func dotAVX(a, b *float32, k int) float32

//go:noescape
func kern1x4AVX(a0, b *float32, ldb, k int, c0 *float32)

//go:noescape
func kern2x4AVX(a0, a1, b *float32, ldb, k int, c0, c1 *float32)

//go:noescape
func accumAVX(y, w, v *float32, ldv, npos, hd int)
