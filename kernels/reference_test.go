package kernels

import (
	"math"
	"testing"
)

// refModel is an independent float64 implementation of the tinyref forward pass, written
// from the architecture description (not by calling tinyref's helpers), used to check it.
type refResult struct {
	logits [][]float64   // per position: raw head logits
	k, v   [][][]float64 // [layer][pos][kvDim], K with RoPE applied
}

func refForward(m *TinyRef, tokens []int) refResult {
	dim, hd, kvd := m.dim, m.headDim, m.kvDim
	n := len(tokens)
	res := refResult{k: make([][][]float64, m.layers), v: make([][][]float64, m.layers)}
	x := make([][]float64, n)
	for p, tok := range tokens {
		x[p] = make([]float64, dim)
		for i := range dim {
			x[p][i] = float64(m.embed[tok*dim+i])
		}
	}
	matvec := func(w []float32, rows, cols int, v []float64) []float64 {
		out := make([]float64, rows)
		for r := range rows {
			var s float64
			for c := range cols {
				s += float64(w[r*cols+c]) * v[c]
			}
			out[r] = s
		}
		return out
	}
	norm := func(v []float64, w []float32) []float64 {
		var ss float64
		for _, a := range v {
			ss += a * a
		}
		inv := 1 / math.Sqrt(ss/float64(len(v))+rmsEps)
		out := make([]float64, len(v))
		for i, a := range v {
			out[i] = a * inv * float64(w[i])
		}
		return out
	}
	rope := func(v []float64, pos int) {
		for h := 0; h < len(v); h += hd {
			for i := 0; i < hd/2; i++ {
				ang := float64(pos) / math.Pow(ropeTheta, float64(2*i)/float64(hd))
				c, s := math.Cos(ang), math.Sin(ang)
				a, b := v[h+2*i], v[h+2*i+1]
				v[h+2*i], v[h+2*i+1] = a*c-b*s, a*s+b*c
			}
		}
	}
	for l, blk := range m.blocks {
		qs := make([][]float64, n)
		res.k[l] = make([][]float64, n)
		res.v[l] = make([][]float64, n)
		for p := range n {
			h := norm(x[p], blk.attnNorm)
			qkv := matvec(blk.wqkv, dim+2*kvd, dim, h)
			qs[p] = qkv[:dim]
			res.k[l][p] = qkv[dim : dim+kvd]
			res.v[l][p] = qkv[dim+kvd:]
			rope(qs[p], p)
			rope(res.k[l][p], p)
		}
		for p := range n {
			att := make([]float64, dim)
			for h := 0; h < m.heads; h++ {
				g := h / (m.heads / m.kvHeads)
				scores := make([]float64, p+1)
				mx := math.Inf(-1)
				for j := 0; j <= p; j++ {
					var s float64
					for d := range hd {
						s += qs[p][h*hd+d] * res.k[l][j][g*hd+d]
					}
					scores[j] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, scores[j])
				}
				var sum float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				for j := 0; j <= p; j++ {
					for d := range hd {
						att[h*hd+d] += scores[j] / sum * res.v[l][j][g*hd+d]
					}
				}
			}
			o := matvec(blk.wo, dim, dim, att)
			for i := range dim {
				x[p][i] += o[i]
			}
			h := norm(x[p], blk.ffnNorm)
			gu := matvec(blk.w13, 2*m.ffn, dim, h)
			act := make([]float64, m.ffn)
			for j := range act {
				g := gu[j]
				act[j] = g / (1 + math.Exp(-g)) * gu[m.ffn+j]
			}
			d := matvec(blk.w2, dim, m.ffn, act)
			for i := range dim {
				x[p][i] += d[i]
			}
		}
	}
	for p := range n {
		res.logits = append(res.logits, matvec(m.head, m.vocab, dim, norm(x[p], m.finalNorm)))
	}
	return res
}

// relErr is ‖got−want‖/‖want‖.
func relErr(got []float32, want []float64) float64 {
	var num, den float64
	for i, w := range want {
		d := float64(got[i]) - w
		num += d * d
		den += w * w
	}
	return math.Sqrt(num / den)
}

func TestForwardMatchesFloat64Reference(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*Config)
		prompt int
		decode int
	}{
		{"default", nil, 40, 6},
		{"multi-query", func(c *Config) { c.KVHeads = 1; c.PageSize = 4 }, 21, 3},
		{"full heads, 3 layers, odd ffn", func(c *Config) { c.KVHeads = 4; c.Layers = 3; c.FFN = 130; c.Dim = 64 }, 17, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTiny(t, tt.edit)
			seq := promptIDs(3, tt.prompt)
			for i := 0; i < tt.decode; i++ {
				seq = append(seq, 'a'+i)
			}
			ref := refForward(m, seq)
			pages := pagesFor(5, 20)
			check := func(what string, got []float32, want []float64) {
				t.Helper()
				e := relErr(got, want)
				t.Logf("%s %.3g", what, e)
				if e >= 1e-4 || math.IsNaN(e) {
					t.Fatalf("%s: relative error %.3g ≥ 1e-4", what, e)
				}
			}
			// Prefill the prompt in one call, then decode token by token.
			m.forward([]SeqInput{{Tokens: seq[:tt.prompt], Pages: pages, Sample: true}})
			check("prefill logits", m.buf.logits[:m.vocab], ref.logits[tt.prompt-1])
			for p := tt.prompt; p < len(seq); p++ {
				m.forward([]SeqInput{{Tokens: seq[p : p+1], Pos: p, Pages: pages, Sample: true}})
				check("decode logits", m.buf.logits[:m.vocab], ref.logits[p])
			}
			// Every position's K and V in the cache, in the documented layout.
			kv := m.KV()
			for l := 0; l < m.layers; l++ {
				var gotK, gotV []float32
				var wantK, wantV []float64
				for p := range seq {
					slot := kv.LayerFloats(pages[p/kv.PageSize], l)[(p%kv.PageSize)*2*m.kvDim:]
					gotK = append(gotK, slot[:m.kvDim]...)
					gotV = append(gotV, slot[m.kvDim:2*m.kvDim]...)
					wantK = append(wantK, ref.k[l][p]...)
					wantV = append(wantV, ref.v[l][p]...)
				}
				check("K", gotK, wantK)
				check("V", gotV, wantV)
			}
		})
	}
}
