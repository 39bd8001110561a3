package reports

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Point is one (x, y) of a time series: x in seconds since load start. It is written as a
// two-element JSON array to keep timelines compact.
type Point struct {
	X, Y float64
}

// MarshalJSON writes [x, y] rounded to microseconds.
func (p Point) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]float64{roundFinite(p.X), roundFinite(p.Y)})
}

// roundFinite rounds to microseconds where that cannot overflow.
func roundFinite(x float64) float64 {
	if math.Abs(x) > 1e15 {
		return x
	}
	return round(x)
}

// UnmarshalJSON reads [x, y].
func (p *Point) UnmarshalJSON(b []byte) error {
	var a [2]float64
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("reports: point: %w", err)
	}
	p.X, p.Y = a[0], a[1]
	return nil
}

// LTTB downsamples pts (sorted by X) to about n points with Largest-Triangle-Three-Buckets
// (Steinarsson 2013, what vegeta's plot uses), always keeping the first and last points
// and every index in forced: the series is cut at the forced points and each piece gets
// a share of n proportional to its length. With n >= len(pts) the input is returned.
func LTTB(pts []Point, n int, forced []int) []Point {
	if n >= len(pts) || len(pts) <= 2 {
		return pts
	}
	cuts := []int{0}
	fs := append([]int(nil), forced...)
	sort.Ints(fs)
	for _, i := range fs {
		if i > cuts[len(cuts)-1] && i < len(pts)-1 {
			cuts = append(cuts, i)
		}
	}
	cuts = append(cuts, len(pts)-1)
	n = max(n, len(cuts))
	out := make([]Point, 0, n+len(cuts))
	budget := n - len(cuts) // points left to share between the pieces' interiors
	for k := 0; k+1 < len(cuts); k++ {
		a, b := cuts[k], cuts[k+1]
		share := int(math.Round(float64(budget) * float64(b-a) / float64(len(pts)-1)))
		piece := lttb(pts[a:b+1], share+2)
		out = append(out, piece[:len(piece)-1]...) // the cut point starts the next piece
	}
	return append(out, pts[len(pts)-1])
}

// lttb is plain LTTB of one piece into n >= 2 points.
func lttb(pts []Point, n int) []Point {
	if n >= len(pts) {
		return pts
	}
	if n <= 2 {
		return []Point{pts[0], pts[len(pts)-1]}
	}
	out := make([]Point, 0, n)
	out = append(out, pts[0])
	every := float64(len(pts)-2) / float64(n-2)
	a := 0
	for i := 0; i < n-2; i++ {
		// The next bucket's average is the third corner of the triangle.
		ns, ne := int(float64(i+1)*every)+1, int(float64(i+2)*every)+1
		ne = min(ne, len(pts))
		var ax, ay float64
		for j := ns; j < ne; j++ {
			ax += pts[j].X
			ay += pts[j].Y
		}
		if cnt := float64(ne - ns); cnt > 0 {
			ax, ay = ax/cnt, ay/cnt
		} else {
			ax, ay = pts[len(pts)-1].X, pts[len(pts)-1].Y
		}
		bs, be := int(float64(i)*every)+1, int(float64(i+1)*every)+1
		best, bestArea := bs, -1.0
		for j := bs; j < be; j++ {
			area := math.Abs((pts[a].X-ax)*(pts[j].Y-pts[a].Y) - (pts[a].X-pts[j].X)*(ay-pts[a].Y))
			if area > bestArea {
				best, bestArea = j, area
			}
		}
		out = append(out, pts[best])
		a = best
	}
	return append(out, pts[len(pts)-1])
}
