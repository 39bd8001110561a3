package kernels

import "math"

// expNeg returns e^x for x ≤ 0 in float32 (Cephes expf: range reduction by ln 2, a
// degree-6 polynomial, within 2 ulp), about four times faster than math.Exp. Attention
// softmax calls it once per (query, key, head); it is a pure function, so it keeps
// results deterministic and batch invariant. Every product is rounded explicitly so no
// multiply-add is fused.
func expNeg(x float32) float32 {
	if x < -87.3 {
		return 0
	}
	if x > 0 || x != x {
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		c1    = 0.693359375
		c2    = -2.12194440e-4
	)
	z := float32(math.Floor(float64(float32(log2e*x) + 0.5)))
	r := x - float32(z*c1)
	r = r - float32(z*c2)
	r2 := float32(r * r)
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	p = float32(p*r2) + r + 1
	return p * math.Float32frombits(uint32(int32(z)+127)<<23)
}
