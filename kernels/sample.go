package kernels

import (
	"math"
	"sort"
)

// sampleToken picks the token at position pos from logits (length = vocab). Greedy when
// Temperature is 0: the highest logit, the lowest id on ties. Otherwise softmax at the
// temperature, cut to the smallest set of most likely tokens whose mass reaches TopP, and
// one draw from sampleUniform(Seed, pos) — a function of the request alone, so the same
// request samples the same token in any batch and on any worker. BOS and padding ids are
// never produced.
func sampleToken(logits []float32, sp Sampling, pos int) int {
	allowed := func(id int) bool { return id < TokenBOS || id == TokenEOS }
	if sp.Temperature <= 0 {
		best, bestV := TokenEOS, float32(math.Inf(-1))
		for id, v := range logits {
			if allowed(id) && v > bestV {
				best, bestV = id, v
			}
		}
		return best
	}
	type cand struct {
		id int
		p  float64
	}
	cands := make([]cand, 0, len(logits))
	maxL := math.Inf(-1)
	for id, v := range logits {
		if allowed(id) {
			maxL = math.Max(maxL, float64(v))
		}
	}
	var sum float64
	for id, v := range logits {
		if !allowed(id) {
			continue
		}
		p := math.Exp((float64(v) - maxL) / sp.Temperature)
		cands = append(cands, cand{id, p})
		sum += p
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].p > cands[j].p })
	keep := len(cands)
	if sp.TopP > 0 && sp.TopP < 1 {
		var acc float64
		for i, c := range cands {
			acc += c.p / sum
			if acc >= sp.TopP {
				keep = i + 1
				break
			}
		}
	}
	cands = cands[:keep]
	var kept float64
	for _, c := range cands {
		kept += c.p
	}
	u := sampleUniform(sp.Seed, pos) * kept
	for _, c := range cands {
		u -= c.p
		if u < 0 {
			return c.id
		}
	}
	return cands[len(cands)-1].id
}
