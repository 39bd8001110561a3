package reports

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func wave(n int) []Point {
	pts := make([]Point, n)
	for i := range pts {
		pts[i] = Point{float64(i), math.Sin(float64(i) / 7)}
	}
	return pts
}

func TestLTTB(t *testing.T) {
	spike := wave(1000)
	spike[613].Y = 50
	for _, tc := range []struct {
		name   string
		in     []Point
		n      int
		forced []int
		keep   []int // indices of in that must survive
		want   int   // expected length (0: <= n + len(forced))
	}{
		{name: "fewer points than n are returned as they are", in: wave(10), n: 20, keep: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, want: 10},
		{name: "keeps first and last", in: wave(1000), n: 50, keep: []int{0, 999}, want: 50},
		{name: "keeps forced points", in: wave(1000), n: 50, forced: []int{17, 500, 501, 998}, keep: []int{0, 17, 500, 501, 998, 999}},
		{name: "forced first and last are not doubled", in: wave(1000), n: 30, forced: []int{0, 999}, keep: []int{0, 999}, want: 30},
		{name: "keeps a spike", in: spike, n: 40, keep: []int{613}},
		{name: "n below the forced count still keeps them", in: wave(100), n: 3, forced: []int{10, 20, 30, 40}, keep: []int{0, 10, 20, 30, 40, 99}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := LTTB(tc.in, tc.n, tc.forced)
			if tc.want > 0 {
				assert.Len(t, out, tc.want)
			} else {
				assert.LessOrEqual(t, len(out), max(tc.n, len(tc.forced)+2)+len(tc.forced)+1)
			}
			for i := 1; i < len(out); i++ {
				require.Less(t, out[i-1].X, out[i].X, "output must stay sorted with no duplicates")
			}
			for _, k := range tc.keep {
				assert.Contains(t, out, tc.in[k], "point %d", k)
			}
		})
	}
}

func FuzzPointJSON(f *testing.F) {
	f.Add([]byte(`[1.5, 2]`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"x":1}`))
	f.Add([]byte(`[1e303, -1e308]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Point
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		out, err := json.Marshal(p)
		require.NoError(t, err)
		var q Point
		require.NoError(t, json.Unmarshal(out, &q))
		assert.Equal(t, roundFinite(p.X), q.X)
	})
}
