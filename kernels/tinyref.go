package kernels

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
)

// TinyRef is a real, tiny Llama-style decoder: token embedding, then per layer RMSNorm →
// grouped-query attention with RoPE over the paged KV cache → residual → RMSNorm →
// SwiGLU FFN → residual, then a final RMSNorm and the output head. Weights are generated
// from Config.Seed, so every process built from the same Config computes the same model.
//
// KV layout: KVStore.LayerFloats(page, layer) holds PageSize token slots; slot t holds
// that token's K (KVHeads × HeadDim floats, head-major, RoPE already applied) followed by
// its V (KVHeads × HeadDim floats):
//
//	slot t: [t*2*KVDim, t*2*KVDim+KVDim) = K,  [t*2*KVDim+KVDim, (t+1)*2*KVDim) = V
//
// with KVDim = KVHeads × HeadDim, so KVBytesPerTokenPerLayer = 2 × KVDim × 4.
//
// Batch invariance: every reduction (matmul, RMSNorm, attention dot products and sums)
// runs over a fixed order determined only by the sequence's own data, so a sequence gives
// bit-identical K/V and logits alone or in any batch, and a prompt prefilled in one call
// gives the same cache as the same prompt prefilled in chunks.
type TinyRef struct {
	info ModelInfo
	kv   *KVStore
	seed uint64

	dim, heads, kvHeads, headDim, kvDim, ffn, vocab, layers int

	embed     []float32 // vocab × dim
	blocks    []tinyBlock
	finalNorm []float32 // dim
	head      []float32 // vocab × dim
	headBias  []float32 // vocab: steers the untrained model toward readable text
	bigram    []float32 // NumByteTokens+1 rows × vocab: bias by previous token (row 256: BOS/other)
	invFreq   []float64 // headDim/2 RoPE frequencies

	// stepTokens is the most tokens one internal sub-step runs (MaxStepTokens; tests
	// lower it on their own instance to exercise the split).
	stepTokens int

	buf tinyScratch
}

type tinyBlock struct {
	attnNorm []float32 // dim
	wqkv     []float32 // (dim + 2·kvDim) × dim: rows of Wq, then Wk, then Wv
	wo       []float32 // dim × dim
	ffnNorm  []float32 // dim
	w13      []float32 // 2·ffn × dim: rows of the gate (W1), then the up projection (W3)
	w2       []float32 // dim × ffn
}

// tinyScratch holds per-step buffers, grown on demand and reused.
type tinyScratch struct {
	x, h, qkv, att, o, gu, act []float32
	pos, seq                   []int
	rows                       []int // index of the last token of each sampled sequence
	hs, logits                 []float32
	sub                        []SeqInput // Forward's sub-steps
	subIdx                     []int      // batch index of each sub-step input
	res                        []int      // sampled tokens before they are copied to out
}

const (
	rmsEps    = 1e-5
	ropeTheta = 10000.0
)

// Weight tensor ids mixed into the weight hash.
const (
	tensorEmbed = iota + 1
	tensorHead
	tensorQKV
	tensorO
	tensorW13
	tensorW2
)

func newTinyRef(cfg Config, info ModelInfo, kv *KVStore) *TinyRef {
	m := &TinyRef{
		info: info, kv: kv, seed: cfg.Seed,
		dim: cfg.Dim, heads: cfg.Heads, kvHeads: cfg.KVHeads, headDim: cfg.Dim / cfg.Heads,
		ffn: cfg.FFN, vocab: cfg.Vocab, layers: cfg.Layers, stepTokens: MaxStepTokens,
	}
	m.kvDim = m.kvHeads * m.headDim
	seed := cfg.Seed
	m.embed = randMatrix(seed, tensorEmbed, 0, m.vocab*m.dim, 1)
	for l := 0; l < m.layers; l++ {
		b := tinyBlock{
			attnNorm: ones(m.dim),
			wqkv:     randMatrix(seed, tensorQKV, l, (m.dim+2*m.kvDim)*m.dim, math.Sqrt(3/float64(m.dim))),
			wo:       randMatrix(seed, tensorO, l, m.dim*m.dim, 0.5*math.Sqrt(3/float64(m.dim))),
			ffnNorm:  ones(m.dim),
			w13:      randMatrix(seed, tensorW13, l, 2*m.ffn*m.dim, math.Sqrt(3/float64(m.dim))),
			w2:       randMatrix(seed, tensorW2, l, m.dim*m.ffn, 0.5*math.Sqrt(3/float64(m.ffn))),
		}
		m.blocks = append(m.blocks, b)
	}
	m.finalNorm = ones(m.dim)
	m.head = randMatrix(seed, tensorHead, 0, m.vocab*m.dim, headScale*math.Sqrt(3/float64(m.dim)))
	m.headBias = outputBias(m.vocab)
	m.bigram = bigramBias(m.vocab)
	m.invFreq = make([]float64, m.headDim/2)
	for i := range m.invFreq {
		m.invFreq[i] = math.Pow(ropeTheta, -float64(2*i)/float64(m.headDim))
	}
	return m
}

// randMatrix fills n weights uniform in [-scale, scale) from (seed, tensor, layer, index).
func randMatrix(seed uint64, tensor, layer, n int, scale float64) []float32 {
	w := make([]float32, n)
	base := hash3(seed, uint64(tensor), uint64(layer))
	s := float32(scale)
	for i := range w {
		w[i] = signedUnit(hash2(base, uint64(i))) * s
	}
	return w
}

func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// headScale is the standard deviation of the head's logits for a unit-RMS hidden state.
const headScale = 0.8

// addTextBias turns the model's raw logits for the token at position pos (after token
// prev) into the logits that are sampled: it adds the unigram and bigram biases (see
// textbias.go) and a context bias — for each id, a fixed offset drawn from (Seed, pos,
// prev, the raw logits' argmax). The context bias plays the part of what training would
// teach: it keeps greedy decoding out of short loops, lets different prompts drift apart,
// and makes EOS reachable. It is a pure function of the sequence, like the logits.
func (m *TinyRef) addTextBias(logits []float32, prev, pos int) {
	top := 0
	for id, v := range logits {
		if v > logits[top] {
			top = id
		}
	}
	addInto(logits, m.headBias)
	addInto(logits, m.bigramRow(prev))
	base := hash3(hash2(m.seed, uint64(pos)), uint64(prev), uint64(top))
	for id := range logits {
		logits[id] += signedUnit(hash2(base, uint64(id))) * contextBias
	}
}

// contextBias is the half-width of the context bias.
const contextBias = 2.0

// Info implements Backend.
func (m *TinyRef) Info() ModelInfo { return m.info }

// KV implements Backend.
func (m *TinyRef) KV() *KVStore { return m.kv }

// StepTime implements Backend: tinyref runs as fast as the CPU allows.
func (m *TinyRef) StepTime(prefillTokens, decodeTokens int) time.Duration { return 0 }

// Forward implements Backend.
func (m *TinyRef) Forward(batch []SeqInput, out []int) error {
	if err := checkBatch("tinyref", m.kv, m.vocab, batch, out); err != nil {
		return err
	}
	// Results go to a private slice first: out may alias the callers' token slices.
	res := growInt(m.buf.res, len(batch))
	for i := range res {
		res[i] = -1
	}
	// Run the batch in sub-steps of at most m.stepTokens tokens, splitting long inputs
	// like a chunked prefill. That bounds the scratch memory and changes no bit: every
	// sub-step only attends to positions whose K/V earlier sub-steps have written.
	sub := m.buf.sub[:0]
	idx := m.buf.subIdx[:0]
	tokens := 0
	for i, s := range batch {
		for off := 0; off < len(s.Tokens); {
			n := min(len(s.Tokens)-off, m.stepTokens-tokens)
			last := off+n == len(s.Tokens)
			sub = append(sub, SeqInput{Tokens: s.Tokens[off : off+n], Pos: s.Pos + off, Pages: s.Pages,
				Sample: s.Sample && last, Sampling: s.Sampling})
			idx = append(idx, i)
			off += n
			tokens += n
			if tokens == m.stepTokens {
				m.runStep(sub, idx, res)
				sub, idx, tokens = sub[:0], idx[:0], 0
			}
		}
	}
	if len(sub) > 0 {
		m.runStep(sub, idx, res)
	}
	m.buf.sub, m.buf.subIdx, m.buf.res = sub[:0], idx[:0], res
	copy(out, res)
	return nil
}

// MaxStepTokens is the most tokens one internal sub-step of Forward runs.
const MaxStepTokens = 1024

// runStep runs one sub-step and samples into out[idx[i]] for each sampled sub[i].
func (m *TinyRef) runStep(sub []SeqInput, idx []int, out []int) {
	m.forward(sub)
	k := 0
	for i, s := range sub {
		if !s.Sample {
			continue
		}
		lg := m.buf.logits[k*m.vocab : (k+1)*m.vocab]
		m.addTextBias(lg, s.Tokens[len(s.Tokens)-1], s.Pos+len(s.Tokens))
		out[idx[i]] = sampleToken(lg, s.Sampling, s.Pos+len(s.Tokens))
		k++
	}
}

// forward runs the transformer over a checked batch: it writes every input token's K/V
// into the cache and leaves in m.buf.logits the raw head logits (no text bias) of the
// last token of each sequence with Sample set, one row per such sequence in batch order.
func (m *TinyRef) forward(batch []SeqInput) {
	T := 0
	for _, s := range batch {
		T += len(s.Tokens)
	}
	b := &m.buf
	dim, qkvW := m.dim, m.dim+2*m.kvDim
	b.x = grow(b.x, T*dim)
	b.h = grow(b.h, T*dim)
	b.qkv = grow(b.qkv, T*qkvW)
	b.att = grow(b.att, T*dim)
	b.o = grow(b.o, T*dim)
	b.gu = grow(b.gu, T*2*m.ffn)
	b.act = grow(b.act, T*m.ffn)
	b.pos = growInt(b.pos, T)
	b.seq = growInt(b.seq, T)

	r := 0
	for si, s := range batch {
		for i, tok := range s.Tokens {
			copy(b.x[r*dim:(r+1)*dim], m.embed[tok*dim:(tok+1)*dim])
			b.pos[r] = s.Pos + i
			b.seq[r] = si
			r++
		}
	}

	for l := range m.blocks {
		blk := &m.blocks[l]
		rmsNormRows(b.h, b.x, blk.attnNorm, T, dim)
		MatMulT(b.qkv, b.h, blk.wqkv, T, qkvW, dim)
		for r := 0; r < T; r++ {
			row := b.qkv[r*qkvW : (r+1)*qkvW]
			m.rope(row[:dim], b.pos[r])            // q
			m.rope(row[dim:dim+m.kvDim], b.pos[r]) // k
			s := &batch[b.seq[r]]
			p := b.pos[r]
			slot := m.kv.LayerFloats(s.Pages[p/m.kv.PageSize], l)
			off := (p % m.kv.PageSize) * 2 * m.kvDim
			copy(slot[off:off+2*m.kvDim], row[dim:dim+2*m.kvDim])
		}
		m.attention(batch, l, T)
		MatMulT(b.o, b.att, blk.wo, T, dim, dim)
		addInto(b.x[:T*dim], b.o[:T*dim])

		rmsNormRows(b.h, b.x, blk.ffnNorm, T, dim)
		MatMulT(b.gu, b.h, blk.w13, T, 2*m.ffn, dim)
		for r := 0; r < T; r++ {
			gu := b.gu[r*2*m.ffn : (r+1)*2*m.ffn]
			act := b.act[r*m.ffn : (r+1)*m.ffn]
			for j := range act {
				g := gu[j]
				act[j] = float32(float64(g)/(1+math.Exp(-float64(g)))) * gu[m.ffn+j]
			}
		}
		MatMulT(b.o, b.act, blk.w2, T, dim, m.ffn)
		addInto(b.x[:T*dim], b.o[:T*dim])
	}

	// Output head, only for the rows that are sampled.
	b.rows = b.rows[:0]
	r = 0
	for _, s := range batch {
		r += len(s.Tokens)
		if s.Sample {
			b.rows = append(b.rows, r-1)
		}
	}
	if len(b.rows) == 0 {
		b.logits = b.logits[:0]
		return
	}
	n := len(b.rows)
	b.hs = grow(b.hs, n*dim)
	for i, row := range b.rows {
		copy(b.hs[i*dim:(i+1)*dim], b.x[row*dim:(row+1)*dim])
	}
	rmsNormRows(b.hs, b.hs, m.finalNorm, n, dim)
	b.logits = grow(b.logits, n*m.vocab)
	MatMulT(b.logits, b.hs, m.head, n, m.vocab, dim)
}

// rope rotates each head's consecutive pairs (2i, 2i+1) by pos·invFreq[i].
func (m *TinyRef) rope(v []float32, pos int) {
	half := m.headDim / 2
	for i := 0; i < half; i++ {
		ang := float64(pos) * m.invFreq[i]
		c, s := float32(math.Cos(ang)), float32(math.Sin(ang))
		for h := 0; h < len(v); h += m.headDim {
			x0, x1 := v[h+2*i], v[h+2*i+1]
			v[h+2*i] = float32(x0*c) - float32(x1*s)
			v[h+2*i+1] = float32(x0*s) + float32(x1*c)
		}
	}
}

// attention computes b.att for every row from the queries in b.qkv and the K/V of layer
// l in the cache (which already holds this step's tokens). Rows are independent, so they
// are spread over goroutines when there is enough work; each row's arithmetic is the same
// whichever goroutine runs it.
func (m *TinyRef) attention(batch []SeqInput, l, T int) {
	work := 0
	for r := 0; r < T; r++ {
		work += m.buf.pos[r] + 1
	}
	work *= m.heads * m.headDim * 2
	workers := 1
	if work >= parallelMinMACs {
		workers = min(runtime.GOMAXPROCS(0), T)
	}
	if workers <= 1 {
		var sc []float32
		for r := 0; r < T; r++ {
			sc = m.attendRow(batch, l, r, sc)
		}
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc []float32
			for r := w; r < T; r += workers {
				sc = m.attendRow(batch, l, r, sc)
			}
		}()
	}
	wg.Wait()
}

// attendRow is causal attention of one query row over positions 0..pos of its sequence.
func (m *TinyRef) attendRow(batch []SeqInput, l, r int, scores []float32) []float32 {
	b := &m.buf
	qkvW := m.dim + 2*m.kvDim
	q := b.qkv[r*qkvW : r*qkvW+m.dim]
	dst := b.att[r*m.dim : (r+1)*m.dim]
	s := &batch[b.seq[r]]
	pos := b.pos[r]
	n := pos + 1
	ps := m.kv.PageSize
	group := m.heads / m.kvHeads
	scores = grow(scores, group*n) // one row of n scores per head of the group
	scale := float32(1 / math.Sqrt(float64(m.headDim)))
	stride := 2 * m.kvDim
	hd := m.headDim
	for g := 0; g < m.kvHeads; g++ {
		// Scores of the group's heads against its keys, two heads per pass over the keys.
		for h := 0; h < group; h += 2 {
			h0 := g*group + h
			row0 := scores[h*n : (h+1)*n]
			if h+1 == group {
				for j := 0; j < n; j += ps {
					cnt := min(ps, n-j)
					page := m.kv.LayerFloats(s.Pages[j/ps], l)
					dotRows(row0[j:j+cnt], q[h0*hd:(h0+1)*hd], page[g*hd:], stride)
				}
				continue
			}
			row1 := scores[(h+1)*n : (h+2)*n]
			for j := 0; j < n; j += ps {
				cnt := min(ps, n-j)
				page := m.kv.LayerFloats(s.Pages[j/ps], l)
				dotRows2(row0[j:j+cnt], row1[j:j+cnt], q[h0*hd:(h0+1)*hd], q[(h0+1)*hd:(h0+2)*hd], page[g*hd:], stride)
			}
		}
		for h := 0; h < group; h++ {
			row := scores[h*n : (h+1)*n]
			maxS := float32(math.Inf(-1))
			for j, sc := range row {
				sc *= scale
				row[j] = sc
				maxS = max(maxS, sc)
			}
			var sum float32
			for j, sc := range row {
				e := expNeg(sc - maxS)
				row[j] = e
				sum += e
			}
			oh := dst[(g*group+h)*hd : (g*group+h+1)*hd]
			clear(oh)
			for j := 0; j < n; j += ps {
				cnt := min(ps, n-j)
				page := m.kv.LayerFloats(s.Pages[j/ps], l)
				accum(oh, row[j:j+cnt], page[m.kvDim+g*hd:], stride)
			}
			inv := 1 / sum
			for d := range oh {
				oh[d] *= inv
			}
		}
	}
	return scores
}

// rmsNormRows writes dst[r] = src[r] / rms(src[r]) * w for rows r < n (dst may be src).
func rmsNormRows(dst, src, w []float32, n, dim int) {
	for r := 0; r < n; r++ {
		x := src[r*dim : (r+1)*dim]
		y := dst[r*dim : (r+1)*dim]
		var ss float32
		for _, v := range x {
			ss += float32(v * v)
		}
		inv := float32(1 / math.Sqrt(float64(ss)/float64(dim)+rmsEps))
		for i, v := range x {
			y[i] = float32(v*inv) * w[i]
		}
	}
}

func addInto(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n, n+n/4)
	}
	return s[:n]
}

func growInt(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n, n+n/4)
	}
	return s[:n]
}

// MaxPosition is the largest token position a backend accepts.
const MaxPosition = 1 << 30

// checkBatch validates a batch before any of it is computed, so a bad request never
// leaves half-written pages behind.
func checkBatch(name string, kv *KVStore, vocab int, batch []SeqInput, out []int) error {
	if len(out) != len(batch) {
		return fmt.Errorf("kernels: %s: len(out)=%d, want len(batch)=%d", name, len(out), len(batch))
	}
	for i, s := range batch {
		if len(s.Tokens) == 0 {
			return fmt.Errorf("kernels: %s: seq %d: no tokens", name, i)
		}
		if s.Pos < 0 || s.Pos > MaxPosition || len(s.Tokens) > MaxPosition-s.Pos {
			return fmt.Errorf("kernels: %s: seq %d: positions %d..%d outside [0, %d]", name, i, s.Pos, s.Pos+len(s.Tokens)-1, MaxPosition)
		}
		end := s.Pos + len(s.Tokens)
		if need := (end + kv.PageSize - 1) / kv.PageSize; len(s.Pages) < need {
			return fmt.Errorf("kernels: %s: seq %d: %d pages cover %d positions, need %d for positions up to %d",
				name, i, len(s.Pages), len(s.Pages)*kv.PageSize, need*kv.PageSize, end-1)
		}
		for j, p := range s.Pages[:(end+kv.PageSize-1)/kv.PageSize] {
			if p < 0 || int(p) >= kv.NumPages {
				return fmt.Errorf("kernels: %s: seq %d: page %d is %d, outside [0, %d)", name, i, j, p, kv.NumPages)
			}
		}
		for j, t := range s.Tokens {
			if t < 0 || t >= vocab {
				return fmt.Errorf("kernels: %s: seq %d: token %d is %d, outside [0, %d)", name, i, j, t, vocab)
			}
		}
		if sp := s.Sampling; sp.Temperature < 0 || !isFinite(sp.Temperature) || sp.TopP < 0 || sp.TopP > 1 || !isFinite(sp.TopP) {
			return fmt.Errorf("kernels: %s: seq %d: bad sampling temperature=%v top_p=%v", name, i, sp.Temperature, sp.TopP)
		}
	}
	return nil
}
