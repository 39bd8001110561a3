package jsonnum

import (
	"encoding/json"
	"math"
	"testing"
)

func check(t *testing.T, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return
	}
	want, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendFloat(nil, f); string(got) != string(want) {
		t.Fatalf("AppendFloat(%v) = %s, encoding/json writes %s", f, got, want)
	}
}

func TestAppendFloatAsEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.7, 1e-7, 1e-6, 123456.789, 1e15, 1e20, 1e21, -1e21,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324, 0.1 + 0.2, 1e14 + 0.5} {
		check(t, f)
	}
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, 1, 0.5, 1e-9, 1e22, -3.25} {
		f.Add(v)
	}
	f.Fuzz(check)
}
