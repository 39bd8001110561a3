package kernels

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fit's grid for the two roofline parameters; Beta1 and Beta2 are solved exactly for
// each grid point.
const (
	fitBeta0Step, fitBeta0Min, fitBeta0Max = 50 * time.Microsecond, 2 * time.Millisecond, 50 * time.Millisecond
	fitComputeStep, fitComputeMax          = 500 * time.Nanosecond, 200 * time.Microsecond
)

// fitRoofline fits step = max(b0, bc·(P+D)) + b1·P + b2·D to the points by least squares
// on the relative error: b0 and bc on a grid, b1 and b2 (non-negative) solved in closed
// form for each grid point.
func fitRoofline(pts []CalibrationPoint) Profile {
	best, bestScore := Profile{}, math.Inf(1)
	for b0 := fitBeta0Min; b0 < fitBeta0Max; b0 += fitBeta0Step {
		for bc := time.Duration(0); bc < fitComputeMax; bc += fitComputeStep {
			// Weighted normal equations for (b1, b2) on r = t - max(b0, bc·T), weights 1/t².
			var a11, a12, a22, v1, v2 float64
			for _, c := range pts {
				t := float64(c.Step)
				w := 1 / (t * t)
				p, d := float64(c.Prefill), float64(c.Decode)
				r := t - float64(max(b0, time.Duration(c.Prefill+c.Decode)*bc))
				a11 += w * p * p
				a12 += w * p * d
				a22 += w * d * d
				v1 += w * p * r
				v2 += w * d * r
			}
			det := a11*a22 - a12*a12
			b1, b2 := (v1*a22-v2*a12)/det, (a11*v2-a12*v1)/det
			if b1 < 0 || b2 < 0 {
				continue
			}
			cand := Profile{Beta0: b0, BetaCompute: bc, Beta1: time.Duration(math.Round(b1)), Beta2: time.Duration(math.Round(b2))}
			var score float64
			for _, c := range pts {
				e := stepRelErr(cand, c)
				score += e * e
			}
			if score < bestScore {
				best, bestScore = cand, score
			}
		}
	}
	return best
}

func stepRelErr(p Profile, c CalibrationPoint) float64 {
	return float64(p.StepTime(c.Prefill, c.Decode)-c.Step) / float64(c.Step)
}

// fitErrors is the largest and the mean absolute relative error of p over its points.
func fitErrors(p Profile, pts []CalibrationPoint) (maxErr, meanErr float64) {
	for _, c := range pts {
		e := math.Abs(stepRelErr(p, c))
		maxErr = max(maxErr, e)
		meanErr += e / float64(len(pts))
	}
	return maxErr, meanErr
}

func calibrated(t *testing.T) []Profile {
	var out []Profile
	for _, p := range Profiles() {
		if CalibrationPoints(p.Name) != nil {
			out = append(out, p)
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestCalibratedProfilesReproduceTheirData(t *testing.T) {
	for _, p := range calibrated(t) {
		for _, c := range CalibrationPoints(p.Name) {
			t.Run(fmt.Sprintf("%s/prefill=%d/decode=%d", p.Name, c.Prefill, c.Decode), func(t *testing.T) {
				got := p.StepTime(c.Prefill, c.Decode)
				assert.LessOrEqual(t, math.Abs(stepRelErr(p, c)), 0.15,
					"StepTime = %v, source %v (%s)", got, c.Step, c.Derivation)
			})
		}
	}
}

func TestCalibratedProfilesAreTheLeastSquaresFit(t *testing.T) {
	for _, p := range calibrated(t) {
		t.Run(p.Name, func(t *testing.T) {
			pts := CalibrationPoints(p.Name)
			fit := fitRoofline(pts)
			t.Logf("fitted Beta0 %v BetaCompute %v Beta1 %v Beta2 %v", fit.Beta0, fit.BetaCompute, fit.Beta1, fit.Beta2)
			assert.Greater(t, fit.Beta0, fitBeta0Min, "fit at the grid's edge")
			assert.Less(t, fit.Beta0, fitBeta0Max-fitBeta0Step, "fit at the grid's edge")
			assert.Less(t, fit.BetaCompute, fitComputeMax-fitComputeStep, "fit at the grid's edge")
			assert.InDelta(t, fit.Beta0, p.Beta0, float64(fitBeta0Step), "Beta0")
			assert.InDelta(t, fit.BetaCompute, p.BetaCompute, float64(fitComputeStep), "BetaCompute")
			assert.InEpsilon(t, fit.Beta1, p.Beta1, 0.02, "Beta1")
			assert.InEpsilon(t, fit.Beta2, p.Beta2, 0.02, "Beta2")

			maxErr, meanErr := fitErrors(p, pts)
			want := fmt.Sprintf("fit error max %.1f%%, mean %.1f%%", 100*maxErr, 100*meanErr)
			assert.Contains(t, p.Description, want, "the description states the fit error")
			assert.Contains(t, p.Description, "github.com/microsoft/vidur", "the description names the source")
		})
	}
}

func TestUncalibratedProfilesSaySo(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			fitted := CalibrationPoints(p.Name) != nil
			assert.Equal(t, !fitted, strings.Contains(p.Description, "not fitted to published measurements"),
				"description %q", p.Description)
		})
	}
}

func TestCalibrationPointsTable(t *testing.T) {
	byProfile := map[string][3]int{} // decode-only, prefill-only, mixed
	for _, c := range calibrationPoints {
		_, err := LookupProfile(c.Profile)
		require.NoError(t, err)
		require.NotEmpty(t, c.Derivation, "%+v", c)
		require.Positive(t, c.Step, "%+v", c)
		n := byProfile[c.Profile]
		switch {
		case c.Prefill == 0 && c.Decode > 0:
			n[0]++
		case c.Decode == 0 && c.Prefill > 0:
			n[1]++
		default:
			n[2]++
		}
		byProfile[c.Profile] = n
	}
	for name, n := range byProfile {
		// Four parameters: enough decode-only and prefill-only points to pin each.
		assert.GreaterOrEqual(t, n[0], 4, "%s decode-only points", name)
		assert.GreaterOrEqual(t, n[1], 4, "%s prefill-only points", name)
		assert.Len(t, CalibrationPoints(name), n[0]+n[1]+n[2])
	}
	assert.Nil(t, CalibrationPoints("qwen2.5-7b-l40s"))
	assert.Nil(t, CalibrationPoints("no-such-profile"))
}
