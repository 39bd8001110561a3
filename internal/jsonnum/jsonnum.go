package jsonnum

import (
	"math"
	"strconv"
)

// AppendFloat appends a finite f as encoding/json writes it (the caller refuses NaN and
// ±Inf, which encoding/json rejects).
func AppendFloat(b []byte, f float64) []byte {
	// Whole numbers (temperature 0, top_p 1: most requests) skip the shortest-digits
	// search, a few percent of the router's CPU; -0 keeps its sign, as encoding/json's.
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && !(f == 0 && math.Signbit(f)) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 → e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
