//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels for matmul.go. They use separate VMULPS and VADDPS (never FMA) so that
// every result is bit-identical to the portable lane-8 Go code: lane l of an 8-float
// accumulator sums the products with index ≡ l (mod 8), in order, and the lanes are
// reduced as ((L0+L4)+(L2+L6)) + ((L1+L5)+(L3+L7)). k is a positive multiple of 8.

// REDUCE folds the 8 lanes of Y register Yr (X view Xr) into the low float of Xr, using
// X15 as scratch.
#define REDUCE(Yr, Xr) \
	VEXTRACTF128 $1, Yr, X15 \
	VADDPS       X15, Xr, Xr \
	VMOVHLPS     Xr, Xr, X15 \
	VADDPS       X15, Xr, Xr \
	VMOVSHDUP    Xr, X15     \
	VADDSS       X15, Xr, Xr

// func dotAVX(a, b *float32, k int) float32
TEXT ·dotAVX(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   k+16(FP), CX
	VXORPS Y0, Y0, Y0

dotloop:
	VMOVUPS (SI), Y1
	VMOVUPS (DI), Y2
	VMULPS  Y2, Y1, Y1
	VADDPS  Y1, Y0, Y0
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     dotloop
	REDUCE(Y0, X0)
	VZEROUPPER
	MOVSS   X0, ret+24(FP)
	RET

// func kern1x4AVX(a0, b *float32, ldb, k int, c0 *float32)
// c0[j] = a0 · b[j*ldb:], j = 0..3
TEXT ·kern1x4AVX(SB), NOSPLIT, $0-40
	MOVQ   a0+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   ldb+16(FP), R8
	MOVQ   k+24(FP), CX
	MOVQ   c0+32(FP), AX
	SHLQ   $2, R8
	LEAQ   (DI)(R8*1), R9
	LEAQ   (R9)(R8*1), R10
	LEAQ   (R10)(R8*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

k14loop:
	VMOVUPS (SI), Y8
	VMOVUPS (DI), Y9
	VMULPS  Y9, Y8, Y9
	VADDPS  Y9, Y0, Y0
	VMOVUPS (R9), Y10
	VMULPS  Y10, Y8, Y10
	VADDPS  Y10, Y1, Y1
	VMOVUPS (R10), Y11
	VMULPS  Y11, Y8, Y11
	VADDPS  Y11, Y2, Y2
	VMOVUPS (R11), Y12
	VMULPS  Y12, Y8, Y12
	VADDPS  Y12, Y3, Y3
	ADDQ    $32, SI
	ADDQ    $32, DI
	ADDQ    $32, R9
	ADDQ    $32, R10
	ADDQ    $32, R11
	SUBQ    $8, CX
	JNZ     k14loop
	REDUCE(Y0, X0)
	REDUCE(Y1, X1)
	REDUCE(Y2, X2)
	REDUCE(Y3, X3)
	VMOVSS  X0, 0(AX)
	VMOVSS  X1, 4(AX)
	VMOVSS  X2, 8(AX)
	VMOVSS  X3, 12(AX)
	VZEROUPPER
	RET

// func kern2x4AVX(a0, a1, b *float32, ldb, k int, c0, c1 *float32)
// c0[j] = a0 · b[j*ldb:], c1[j] = a1 · b[j*ldb:], j = 0..3
TEXT ·kern2x4AVX(SB), NOSPLIT, $0-56
	MOVQ   a0+0(FP), SI
	MOVQ   a1+8(FP), DX
	MOVQ   b+16(FP), DI
	MOVQ   ldb+24(FP), R8
	MOVQ   k+32(FP), CX
	SHLQ   $2, R8
	LEAQ   (DI)(R8*1), R9
	LEAQ   (R9)(R8*1), R10
	LEAQ   (R10)(R8*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

k24loop:
	VMOVUPS (SI), Y8
	VMOVUPS (DX), Y9
	VMOVUPS (DI), Y10
	VMULPS  Y10, Y8, Y11
	VADDPS  Y11, Y0, Y0
	VMULPS  Y10, Y9, Y12
	VADDPS  Y12, Y4, Y4
	VMOVUPS (R9), Y10
	VMULPS  Y10, Y8, Y13
	VADDPS  Y13, Y1, Y1
	VMULPS  Y10, Y9, Y14
	VADDPS  Y14, Y5, Y5
	VMOVUPS (R10), Y10
	VMULPS  Y10, Y8, Y11
	VADDPS  Y11, Y2, Y2
	VMULPS  Y10, Y9, Y12
	VADDPS  Y12, Y6, Y6
	VMOVUPS (R11), Y10
	VMULPS  Y10, Y8, Y13
	VADDPS  Y13, Y3, Y3
	VMULPS  Y10, Y9, Y14
	VADDPS  Y14, Y7, Y7
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	ADDQ    $32, R9
	ADDQ    $32, R10
	ADDQ    $32, R11
	SUBQ    $8, CX
	JNZ     k24loop
	MOVQ    c0+40(FP), AX
	MOVQ    c1+48(FP), BX
	REDUCE(Y0, X0)
	REDUCE(Y1, X1)
	REDUCE(Y2, X2)
	REDUCE(Y3, X3)
	REDUCE(Y4, X4)
	REDUCE(Y5, X5)
	REDUCE(Y6, X6)
	REDUCE(Y7, X7)
	VMOVSS  X0, 0(AX)
	VMOVSS  X1, 4(AX)
	VMOVSS  X2, 8(AX)
	VMOVSS  X3, 12(AX)
	VMOVSS  X4, 0(BX)
	VMOVSS  X5, 4(BX)
	VMOVSS  X6, 8(BX)
	VMOVSS  X7, 12(BX)
	VZEROUPPER
	RET

// func accumAVX(y, w, v *float32, ldv, npos, hd int)
// y[d] += w[j]*v[j*ldv+d] for j = 0..npos-1 in order, d < hd (npos > 0, hd a positive
// multiple of 8): the attention-weighted sum of V rows.
TEXT ·accumAVX(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ w+8(FP), DX
	MOVQ v+16(FP), SI
	MOVQ ldv+24(FP), R8
	SHLQ $2, R8
	MOVQ npos+32(FP), R9
	MOVQ hd+40(FP), CX

accdloop:
	VMOVUPS (DI), Y0
	MOVQ    DX, R10
	MOVQ    SI, R11
	MOVQ    R9, R12

accjloop:
	VBROADCASTSS (R10), Y1
	VMOVUPS      (R11), Y2
	VMULPS       Y2, Y1, Y1
	VADDPS       Y1, Y0, Y0
	ADDQ         $4, R10
	ADDQ         R8, R11
	DECQ         R12
	JNZ          accjloop
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	ADDQ         $32, SI
	SUBQ         $8, CX
	JNZ          accdloop
	VZEROUPPER
	RET
