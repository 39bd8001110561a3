package kernels

import "math"

// Counter-based randomness: every draw is a pure function of its inputs (a seed and a
// counter such as a position or a weight index), so results never depend on the order
// or the batch in which they are computed.

// mix64 is the SplitMix64 finaliser: a bijective, well-mixed hash of x.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hash2 combines two words.
func hash2(a, b uint64) uint64 { return mix64(mix64(a) ^ (b * 0xd1b54a32d192ed03)) }

// hash3 combines three words.
func hash3(a, b, c uint64) uint64 { return mix64(hash2(a, b) ^ (c * 0x8cb92ba72f3d8dd7)) }

// unitFloat maps a hash to a float64 uniform in [0, 1) with 53 random bits.
func unitFloat(h uint64) float64 { return float64(h>>11) * (1.0 / (1 << 53)) }

// sampleUniform is the uniform draw used to sample the token at position pos of a request
// with the given sampling seed.
func sampleUniform(seed uint64, pos int) float64 {
	return unitFloat(hash3(seed, uint64(pos), 0x73616d706c65)) // "sample"
}

// signedUnit maps a hash to a float32 uniform in [-1, 1).
func signedUnit(h uint64) float32 {
	return float32(unitFloat(h)*2 - 1)
}

// isFinite reports whether f is neither NaN nor ±Inf.
func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
