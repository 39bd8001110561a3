package kernels

import (
	"math"
	"testing"
)

func TestExpNeg(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		x := -float32(i) * 90 / 200000
		got, want := float64(expNeg(x)), math.Exp(float64(x))
		if want < 1e-37 {
			continue // below float32's normal range
		}
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
	}
	if worst > 3e-7 {
		t.Fatalf("worst relative error %.3g", worst)
	}
	for _, x := range []float32{0, -88, float32(math.Inf(-1))} {
		if got, want := expNeg(x), float32(math.Exp(float64(x))); got != want && x > -87 {
			t.Errorf("expNeg(%v) = %v, want %v", x, got, want)
		}
	}
}
