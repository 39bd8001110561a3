package nearest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRank(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name string
		xs   []int
		q    float64
		want int
	}{
		{"p50 of 1..100", hundred, 0.50, 50},
		{"p99 of 1..100", hundred, 0.99, 99},
		{"p100 is the max", hundred, 1, 100},
		{"p0 is the min", hundred, 0, 1},
		{"one value", []int{7}, 0.99, 7},
		{"p99 of 10 values is the max", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.99, 10},
		{"p90 of 10 values", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.90, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Rank(tt.xs, tt.q))
		})
	}
}

// TestIndexIsTheIntegerRule: for the percentiles the project reports, the float rule
// equals ceil(p·n/100) − 1 computed in integers (the self-check's former rule).
func TestIndexIsTheIntegerRule(t *testing.T) {
	for _, p := range []int{50, 90, 95, 99} {
		for n := 1; n <= 100_000; n++ {
			want := (n*p+99)/100 - 1
			if got := Index(n, float64(p)/100); got != want {
				t.Fatalf("p%d of %d values: index %d, want %d", p, n, got, want)
			}
		}
	}
	assert.Equal(t, 2*time.Second, Rank([]time.Duration{time.Second, 2 * time.Second}, 0.99))
}
