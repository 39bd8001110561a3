package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"
)

// Profile is a step-time model of a real model on real hardware:
//
//	step = max(Beta0, BetaCompute·(prefill_tokens + decode_tokens)) + Beta1·prefill_tokens + Beta2·decode_tokens
//
// Beta0 is the memory-bound floor of a step (weights streamed once); BetaCompute, when
// set, the compute-bound cost per token of the linear layers, which takes over from Beta0
// once a step carries enough tokens (a roofline); Beta1 and Beta2 what each prefill token
// and each decoding sequence adds on top (attention, KV writes). With BetaCompute zero
// this is step = Beta0 + Beta1·prefill_tokens + Beta2·decode_tokens. Profiles fitted to
// published measurements name their source and fit error in Description and list their
// data points in CalibrationPoints; the others are first-order estimates and say so.
type Profile struct {
	Name        string
	Description string
	Beta0       time.Duration // memory-bound floor of a step (weights streamed once)
	Beta1       time.Duration // per prefill token, on top of the floor
	Beta2       time.Duration // per decode token (one per running sequence), on top of the floor
	// BetaCompute is the compute-bound cost per token of the step; zero means none.
	BetaCompute time.Duration
	// ModelKVBytesPerToken is the modelled model's KV footprint per token, all layers.
	ModelKVBytesPerToken int64
}

var profiles = []Profile{
	{
		Name: "llama3-8b-a100",
		Description: "Llama-3-8B bf16 on one A100 80GB (32 layers, 8 KV heads × 128, bf16 KV); " + vidurFitted +
			"Meta-Llama-3-8B on A100, decode at 2048 tokens of context; fit error max 9.7%, mean 3.0%",
		Beta0: 10450 * time.Microsecond, BetaCompute: 53500 * time.Nanosecond, Beta1: 34460 * time.Nanosecond, Beta2: 191060 * time.Nanosecond,
		ModelKVBytesPerToken: 131072,
	},
	{
		Name: "llama3-8b-h100",
		Description: "Llama-3-8B bf16 on one H100 SXM (32 layers, 8 KV heads × 128, bf16 KV); " + vidurFitted +
			"Meta-Llama-3-8B on A100 carried to H100 by Llama-2-7B's measured H100/A100 ratios, decode at 2048 tokens of context; fit error max 10.9%, mean 3.6%",
		Beta0: 6200 * time.Microsecond, BetaCompute: 14500 * time.Nanosecond, Beta1: 18370 * time.Nanosecond, Beta2: 121780 * time.Nanosecond,
		ModelKVBytesPerToken: 131072,
	},
	{
		Name: "llama3-70b-a100x4",
		Description: "Llama-3-70B bf16 on four A100 80GB with tensor parallelism (80 layers, 8 KV heads × 128); " + vidurFitted +
			"Meta-Llama-3-70B on A100 at TP 4 with A100 all-reduce, attention scaled from Meta-Llama-3-8B, decode at 2048 tokens of context; fit error max 7.9%, mean 3.7%",
		Beta0: 37600 * time.Microsecond, BetaCompute: 100000 * time.Nanosecond, Beta1: 123410 * time.Nanosecond, Beta2: 206810 * time.Nanosecond,
		ModelKVBytesPerToken: 327680,
	},
	{
		Name: "llama3-70b-h100x4",
		Description: "Llama-3-70B bf16 on four H100 SXM with tensor parallelism (80 layers, 8 KV heads × 128); " + vidurFitted +
			"Llama-2-70B (same layer shapes) on H100 at TP 4 with H100 all-reduce, attention scaled from Meta-Llama-3-8B on A100, decode at 2048 tokens of context; fit error max 8.9%, mean 3.1%",
		Beta0: 22850 * time.Microsecond, BetaCompute: 55000 * time.Nanosecond, Beta1: 29970 * time.Nanosecond, Beta2: 100700 * time.Nanosecond,
		ModelKVBytesPerToken: 327680,
	},
	{
		Name: "qwen2.5-7b-l40s",
		Description: "Qwen2.5-7B bf16 on one L40S (28 layers, 4 KV heads × 128); not fitted to published measurements " +
			"(Vidur profiles A100, A40 and H100 only, and no per-step L40S figures were found): a first-order estimate " +
			"from weight bytes over memory bandwidth, FLOPs per token and per-sequence attention",
		Beta0: 20 * time.Millisecond, Beta1: 85 * time.Microsecond, Beta2: 80 * time.Microsecond,
		ModelKVBytesPerToken: 57344,
	},
	{
		Name: "tiny-cpu",
		Description: "the default tinyref model on one CPU core with AVX2 (2 layers, 2 KV heads × 32, fp32 KV); " +
			"not fitted to published measurements: measured on the 2-core development machine under load from other " +
			"jobs by BenchmarkDecode and BenchmarkPrefill (2026-12-02, medians of 6 runs: decode of 1, 8 and 32 " +
			"sequences 83 µs, 653 µs and 2.40 ms, prefill of 512 tokens 23.7 ms; ranges 70–101 µs, 0.53–2.0 ms, " +
			"1.66–3.19 ms and 19.4–30.2 ms); Beta0 and Beta2 by least squares over the decode medians, Beta1 from the prefill",
		Beta0: 30 * time.Microsecond, Beta1: 46 * time.Microsecond, Beta2: 74 * time.Microsecond,
		ModelKVBytesPerToken: 1024,
	},
	{
		Name:                 "zero",
		Description:          "no compute time at all (every beta 0; tinyref's KV footprint), not fitted to published measurements: measures the serving software's own ceiling",
		ModelKVBytesPerToken: 1024,
	},
}

// vidurFitted opens the description of a profile fitted to CalibrationPoints.
const vidurFitted = "fitted (roofline, least squares on relative error) to step times summed from Vidur's profiled operator times " +
	"(github.com/microsoft/vidur@7d47513, data/profiling; points, sources and derivation: kernels.CalibrationPoints) for "

// ZeroProfile is the profile whose steps take no modelled time.
const ZeroProfile = "zero"

// Profiles returns the named timing profiles, sorted by name.
func Profiles() []Profile {
	p := slices.Clone(profiles)
	slices.SortFunc(p, func(a, b Profile) int { return strings.Compare(a.Name, b.Name) })
	return p
}

// LookupProfile returns the profile with this name; the error lists the valid names.
func LookupProfile(name string) (Profile, error) {
	for _, p := range profiles {
		if p.Name == name {
			return p, nil
		}
	}
	names := make([]string, 0, len(profiles))
	for _, p := range Profiles() {
		names = append(names, p.Name)
	}
	return Profile{}, fmt.Errorf("kernels: unknown profile %q (valid: %s)", name, strings.Join(names, ", "))
}

// StepTime is the profile's step time without jitter.
func (p Profile) StepTime(prefillTokens, decodeTokens int) time.Duration {
	if prefillTokens <= 0 && decodeTokens <= 0 {
		return 0
	}
	pre, dec := time.Duration(max(prefillTokens, 0)), time.Duration(max(decodeTokens, 0))
	return max(p.Beta0, (pre+dec)*p.BetaCompute) + pre*p.Beta1 + dec*p.Beta2
}

// stepClock adds seeded jitter to a profile: the n-th non-empty step is scaled by
// 1 + Jitter·u with u uniform in [-1, 1) drawn from (Seed, n).
type stepClock struct {
	profile Profile
	seed    uint64
	jitter  float64
	slow    float64 // Config.Slowdown
	steps   uint64
}

func newStepClock(cfg Config, p Profile) *stepClock {
	return &stepClock{profile: p, seed: cfg.Seed, jitter: cfg.Jitter, slow: cfg.Slowdown}
}

func (c *stepClock) StepTime(prefillTokens, decodeTokens int) time.Duration {
	base := c.profile.StepTime(prefillTokens, decodeTokens)
	if base == 0 {
		return 0
	}
	n := c.steps
	c.steps++
	u := unitFloat(hash3(c.seed, n, 0x6a6974746572))*2 - 1 // "jitter"
	return time.Duration(float64(base) * (1 + c.jitter*u) * (1 + c.slow))
}

// SimTime is the timing-model backend. It moves real (small) KV bytes so that transfer,
// checksums and page accounting are exercised, but computes no model:
//
//   - Forward writes, for each input token at position p, SimKVBytesPerTokenPerLayer
//     bytes per layer that are a hash of (token, p, layer, word index);
//   - the sampled next token is a hash of every KV byte of the sequence (positions 0 up to
//     the last input token, every layer), so a page corrupted in transfer changes the
//     output, and of the sampling seed when Temperature > 0. The digest picks the token
//     from the English bigram table tinyref uses, so the text reads alike and ends with
//     EOS after a period now and then.
//
// Reading all of a sequence's KV costs about 1 ns per 8 bytes, as attention would.
type SimTime struct {
	info  ModelInfo
	kv    *KVStore
	clock *stepClock
	vocab int
	res   []int
}

func newSimTime(cfg Config, info ModelInfo, kv *KVStore, p Profile) *SimTime {
	return &SimTime{info: info, kv: kv, clock: newStepClock(cfg, p), vocab: cfg.Vocab}
}

// Info implements Backend.
func (s *SimTime) Info() ModelInfo { return s.info }

// KV implements Backend.
func (s *SimTime) KV() *KVStore { return s.kv }

// StepTime implements Backend.
func (s *SimTime) StepTime(prefillTokens, decodeTokens int) time.Duration {
	return s.clock.StepTime(prefillTokens, decodeTokens)
}

// Forward implements Backend.
func (s *SimTime) Forward(batch []SeqInput, out []int) error {
	if err := checkBatch("simtime", s.kv, s.vocab, batch, out); err != nil {
		return err
	}
	// Results go to a private slice first: out may alias the callers' token slices.
	res := growInt(s.res, len(batch))
	s.res = res
	ps, per := s.kv.PageSize, s.kv.BytesPerToken
	for _, sq := range batch {
		for t, tok := range sq.Tokens {
			p := sq.Pos + t
			for l := 0; l < s.kv.Layers; l++ {
				b := s.kv.LayerBytes(sq.Pages[p/ps], l)[(p%ps)*per : (p%ps+1)*per]
				simKVFill(b, tok, p, l)
			}
		}
	}
	for i, sq := range batch {
		res[i] = -1
		if !sq.Sample {
			continue
		}
		h := s.digest(sq)
		pos := sq.Pos + len(sq.Tokens)
		if sq.Sampling.Temperature > 0 {
			h = hash2(h, hash2(sq.Sampling.Seed, uint64(pos)))
		}
		res[i] = simToken(h, sq.Tokens[len(sq.Tokens)-1])
	}
	copy(out, res)
	return nil
}

// simKVFill writes the deterministic KV bytes of one token at one position and layer.
func simKVFill(b []byte, tok, pos, layer int) {
	base := hash3(uint64(tok), uint64(pos), uint64(layer))
	for w := 0; w+8 <= len(b); w += 8 {
		binary.LittleEndian.PutUint64(b[w:], mix64(base+uint64(w)))
	}
}

// digest folds every KV word of positions [0, Pos+len(Tokens)) of the sequence, layer by
// layer, in four independent lanes.
func (s *SimTime) digest(sq SeqInput) uint64 {
	ps, per := s.kv.PageSize, s.kv.BytesPerToken
	n := sq.Pos + len(sq.Tokens)
	var h [4]uint64
	const k = 0x9fb21c651e98df25
	for l := 0; l < s.kv.Layers; l++ {
		for j := 0; j < n; j += ps {
			b := s.kv.LayerBytes(sq.Pages[j/ps], l)[:min(ps, n-j)*per]
			for len(b) >= 32 {
				h[0] = bits.RotateLeft64(h[0]^binary.LittleEndian.Uint64(b[0:]), 29) * k
				h[1] = bits.RotateLeft64(h[1]^binary.LittleEndian.Uint64(b[8:]), 29) * k
				h[2] = bits.RotateLeft64(h[2]^binary.LittleEndian.Uint64(b[16:]), 29) * k
				h[3] = bits.RotateLeft64(h[3]^binary.LittleEndian.Uint64(b[24:]), 29) * k
				b = b[32:]
			}
			for len(b) >= 8 {
				h[0] = bits.RotateLeft64(h[0]^binary.LittleEndian.Uint64(b), 29) * k
				b = b[8:]
			}
		}
	}
	return hash3(h[0]^h[1], h[2]^h[3], uint64(n))
}

// simToken maps a digest to the token after prev: a draw, with the digest as the random
// number, from the same English bigram table that steers tinyref (textbias.go), so the
// text looks alike and EOS follows a period now and then.
func simToken(h uint64, prev int) int {
	t := simBigram()
	r := NumByteTokens
	if prev >= 0 && prev < NumByteTokens {
		r = prev
	}
	cdf := t.cdf[r]
	u := unitFloat(h) * cdf[len(cdf)-1]
	k, _ := slices.BinarySearchFunc(cdf, u, func(c, u float64) int {
		if c <= u {
			return -1
		}
		return 1
	})
	return t.ids[min(k, len(t.ids)-1)]
}

// simBigramTable holds, per previous byte (row 256: BOS or an unseen byte), the
// cumulative bigram weights over the ids simtime writes.
type simBigramTable struct {
	ids []int
	cdf [NumByteTokens + 1][]float64
}

// simSharpen sharpens the bigram distribution (like a sampling temperature of 2/3) so
// rare bytes stay rare.
const simSharpen = 1.5

var simBigram = sync.OnceValue(func() *simBigramTable {
	const vocab = TokenEOS + 1
	bias := bigramBias(vocab)
	t := &simBigramTable{}
	for id := range vocab {
		if id == '\n' || (id >= ' ' && id < 0x7f) || id == TokenEOS {
			t.ids = append(t.ids, id)
		}
	}
	for r := range t.cdf {
		row := bias[r*vocab : (r+1)*vocab]
		cdf := make([]float64, len(t.ids))
		var acc float64
		for k, id := range t.ids {
			acc += math.Exp(simSharpen * float64(row[id]))
			cdf[k] = acc
		}
		t.cdf[r] = cdf
	}
	return t
})

// Paced is tinyref compute held to a simtime profile's step time: real bytes and real
// tokens at GPU-like speed. Info().ModelKVBytesPerToken is the profile's, so the pool is
// sized as for the modelled model.
type Paced struct {
	*TinyRef
	clock *stepClock
}

// StepTime implements Backend with the profile's jittered step time.
func (p *Paced) StepTime(prefillTokens, decodeTokens int) time.Duration {
	return p.clock.StepTime(prefillTokens, decodeTokens)
}
