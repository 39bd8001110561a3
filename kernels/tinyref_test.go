package kernels

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTinyRefDeterministic(t *testing.T) {
	a := newTiny(t, nil)
	b := newTiny(t, nil)
	other := newTiny(t, func(c *Config) { c.Seed = 2 })
	prompt := promptIDs(1, 30)
	for _, sp := range []Sampling{{}, {Temperature: 0.8, TopP: 0.9, Seed: 42}} {
		ga := generate(t, a, prompt, pagesFor(0, 8), sp, 40)
		gb := generate(t, b, prompt, pagesFor(100, 8), sp, 40)
		if !slices.Equal(ga, gb) {
			t.Fatalf("%+v: same seed gave %v and %v", sp, ga, gb)
		}
		if go2 := generate(t, other, prompt, pagesFor(0, 8), sp, 40); slices.Equal(ga, go2) {
			t.Fatalf("%+v: a different weight seed gave the same tokens", sp)
		}
		again := generate(t, a, prompt, pagesFor(200, 8), sp, 40)
		if !slices.Equal(ga, again) {
			t.Fatalf("%+v: rerun on other pages differs", sp)
		}
	}
}

// TestBatchInvariance runs one sequence alone and as one of 16 (with different prompt
// lengths, a mix of prefill and decode, and sampling settings) and requires bit-identical
// K/V and logits.
func TestBatchInvariance(t *testing.T) {
	const n = 16
	prompts := make([][]int, n)
	for i := range prompts {
		prompts[i] = promptIDs(i, 5+i*7)
	}
	// Alone: each sequence in its own backend.
	aloneLogits := make([][]float32, n)
	aloneKV := make([][]byte, n)
	for i := range n {
		m := newTiny(t, nil)
		pages := pagesFor(i*10, 10)
		m.forward([]SeqInput{{Tokens: prompts[i], Pages: pages, Sample: true}})
		aloneLogits[i] = slices.Clone(m.buf.logits[:m.vocab])
		aloneKV[i] = seqKV(m.KV(), pages, len(prompts[i]))
	}
	// Batched prefill of all 16 in one call (large enough to take the parallel paths).
	m := newTiny(t, nil)
	batch := make([]SeqInput, n)
	for i := range batch {
		batch[i] = SeqInput{Tokens: prompts[i], Pages: pagesFor(i*10, 10), Sample: true}
	}
	m.forward(batch)
	for i := range n {
		if !slices.Equal(m.buf.logits[i*m.vocab:(i+1)*m.vocab], aloneLogits[i]) {
			t.Fatalf("seq %d: batched prefill logits differ from alone", i)
		}
		if !bytes.Equal(seqKV(m.KV(), batch[i].Pages, len(prompts[i])), aloneKV[i]) {
			t.Fatalf("seq %d: batched prefill KV differs from alone", i)
		}
	}

	// Decode: greedy and sampled sequences stepped together must produce the tokens they
	// produce alone.
	sps := func(i int) Sampling {
		if i%2 == 0 {
			return Sampling{}
		}
		return Sampling{Temperature: 0.7, TopP: 0.95, Seed: uint64(i)}
	}
	want := make([][]int, n)
	for i := range n {
		want[i] = generate(t, newTiny(t, nil), prompts[i], pagesFor(i*10, 10), sps(i), 12)
	}
	m = newTiny(t, nil)
	out := make([]int, n)
	for i := range batch {
		batch[i].Sampling = sps(i)
	}
	require.NoError(t, m.Forward(batch, out))
	got := make([][]int, n)
	for i := range n {
		got[i] = []int{out[i]}
	}
	for step := 1; step < 12; step++ {
		var dec []SeqInput
		var idx []int
		for i := range n {
			if g := got[i]; len(g) < len(want[i]) {
				dec = append(dec, SeqInput{Tokens: g[len(g)-1:], Pos: len(prompts[i]) + len(g) - 1,
					Pages: pagesFor(i*10, 10), Sample: true, Sampling: sps(i)})
				idx = append(idx, i)
			}
		}
		if len(dec) == 0 {
			break
		}
		o := make([]int, len(dec))
		require.NoError(t, m.Forward(dec, o))
		for k, i := range idx {
			got[i] = append(got[i], o[k])
		}
	}
	for i := range n {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("seq %d: batched decode %v, alone %v", i, got[i], want[i])
		}
	}
}

func TestChunkedPrefillEqualsOneShot(t *testing.T) {
	prompt := promptIDs(9, 77)
	pages := pagesFor(3, 6)
	one := newTiny(t, nil)
	one.forward([]SeqInput{{Tokens: prompt, Pages: pages, Sample: true}})
	wantLogits := slices.Clone(one.buf.logits[:one.vocab])
	wantKV := seqKV(one.KV(), pages, len(prompt))

	for _, chunk := range []int{1, 5, 16, 32, 76} {
		m := newTiny(t, nil)
		for p := 0; p < len(prompt); p += chunk {
			end := min(p+chunk, len(prompt))
			out := []int{0}
			require.NoError(t, m.Forward([]SeqInput{{Tokens: prompt[p:end], Pos: p, Pages: pages, Sample: end == len(prompt)}}, out))
			if end < len(prompt) && out[0] != -1 {
				t.Fatalf("chunk without Sample returned token %d", out[0])
			}
		}
		if !bytes.Equal(seqKV(m.KV(), pages, len(prompt)), wantKV) {
			t.Fatalf("chunk %d: KV differs from one-shot prefill", chunk)
		}
		m.forward([]SeqInput{{Tokens: prompt[len(prompt)-1:], Pos: len(prompt) - 1, Pages: pages, Sample: true}})
		if !slices.Equal(m.buf.logits[:m.vocab], wantLogits) {
			t.Fatalf("chunk %d: logits differ from one-shot prefill", chunk)
		}
	}
}

func TestTinyRefOutputIsText(t *testing.T) {
	m := newTiny(t, nil)
	var tk Tokenizer
	eos := 0
	for i := range 8 {
		gen := generate(t, m, promptIDs(i, 20), pagesFor(0, 40), Sampling{}, 120)
		for _, id := range gen {
			if id == TokenEOS {
				eos++
				continue
			}
			if id != '\n' && (id < ' ' || id > '~') {
				t.Fatalf("prompt %d: generated non-printable id %d in %q", i, id, tk.Decode(gen))
			}
		}
		if i == 0 {
			t.Logf("sample: %q", tk.Decode(gen))
		}
		if txt := tk.Decode(gen); !strings.Contains(txt, " ") && len(gen) > 30 {
			t.Errorf("prompt %d: no spaces in %q", i, txt)
		}
	}
	t.Logf("%d of 8 greedy generations ended with EOS", eos)
}

func TestForwardRejectsBadInput(t *testing.T) {
	m := newTiny(t, func(c *Config) { c.NumPages = 4 })
	tests := []struct {
		name  string
		batch []SeqInput
		out   int
		want  string
	}{
		{"out length", []SeqInput{{Tokens: []int{1}, Pages: pagesFor(0, 1)}}, 2, "len(out)=2"},
		{"no tokens", []SeqInput{{Pages: pagesFor(0, 1)}}, 1, "no tokens"},
		{"negative pos", []SeqInput{{Tokens: []int{1}, Pos: -1, Pages: pagesFor(0, 1)}}, 1, "outside [0, 1073741824]"},
		{"huge pos", []SeqInput{{Tokens: []int{1}, Pos: math.MaxInt - 1, Pages: pagesFor(0, 1)}}, 1, "positions"},
		{"pages too short", []SeqInput{{Tokens: make([]int, 17), Pages: pagesFor(0, 1)}}, 1, "need 32"},
		{"page out of range", []SeqInput{{Tokens: []int{1}, Pages: []int32{4}}}, 1, "outside [0, 4)"},
		{"token out of range", []SeqInput{{Tokens: []int{264}, Pages: pagesFor(0, 1)}}, 1, "token 0 is 264"},
		{"bad temperature", []SeqInput{{Tokens: []int{1}, Pages: pagesFor(0, 1), Sampling: Sampling{Temperature: math.NaN()}}}, 1, "bad sampling"},
		{"bad top_p", []SeqInput{{Tokens: []int{1}, Pages: pagesFor(0, 1), Sampling: Sampling{TopP: 1.5}}}, 1, "bad sampling"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Forward(tt.batch, make([]int, tt.out))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "kernels: tinyref: ") {
				t.Fatalf("Forward = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestSampleToken(t *testing.T) {
	logits := make([]float32, DefaultVocab)
	for i := range logits {
		logits[i] = -10
	}
	logits['a'], logits['b'], logits['c'] = 3, 3, 2.9
	logits[TokenBOS], logits[TokenFirstPad] = 100, 100
	if got := sampleToken(logits, Sampling{}, 5); got != 'a' {
		t.Fatalf("greedy = %d, want 'a' (lowest id of a tie, never BOS or padding)", got)
	}
	counts := map[int]int{}
	for pos := range 3000 {
		id := sampleToken(logits, Sampling{Temperature: 1, Seed: 7}, pos)
		counts[id]++
		if id == TokenBOS || id >= TokenFirstPad {
			t.Fatalf("sampled special id %d", id)
		}
		if again := sampleToken(logits, Sampling{Temperature: 1, Seed: 7}, pos); again != id {
			t.Fatalf("same (seed, pos) drew %d then %d", id, again)
		}
	}
	if counts['a'] < 800 || counts['b'] < 800 || counts['c'] < 700 {
		t.Fatalf("temperature 1 over three near-equal logits drew %v", counts)
	}
	// top_p 0.5 keeps only the two most likely ('a' and 'b').
	for pos := range 500 {
		if id := sampleToken(logits, Sampling{Temperature: 1, TopP: 0.5, Seed: 7}, pos); id != 'a' && id != 'b' {
			t.Fatalf("top_p 0.5 drew %q", rune(id))
		}
	}
	// A tiny temperature is greedy in effect.
	if got := sampleToken(logits, Sampling{Temperature: 1e-6, Seed: 1}, 0); got != 'a' && got != 'b' {
		t.Fatalf("near-zero temperature drew %d", got)
	}
}

// TestForwardSplitsLongSteps checks that Forward's internal sub-steps (at most
// stepTokens tokens each) give the same K/V and tokens as one unsplit pass.
func TestForwardSplitsLongSteps(t *testing.T) {
	const stepTokens = 64
	long := promptIDs(11, 2*stepTokens+30)
	short := promptIDs(12, 100)
	longPages, shortPages := pagesFor(0, 12), pagesFor(200, 8)

	whole := newTiny(t, nil)
	whole.forward([]SeqInput{{Tokens: long, Pages: longPages, Sample: true}, {Tokens: short, Pages: shortPages, Sample: true}})
	wantLong := sampleToken(whole.biased(0, long), Sampling{}, len(long))
	wantShort := sampleToken(whole.biased(1, short), Sampling{}, len(short))

	m := newTiny(t, nil)
	m.stepTokens = stepTokens
	out := []int{0, 0, 0}
	// The middle sequence is not sampled; the short one straddles a sub-step boundary.
	batch := []SeqInput{
		{Tokens: long, Pages: longPages, Sample: true},
		{Tokens: promptIDs(13, 40), Pages: pagesFor(300, 3)},
		{Tokens: short, Pages: shortPages, Sample: true},
	}
	require.NoError(t, m.Forward(batch, out))
	if out[0] != wantLong || out[1] != -1 || out[2] != wantShort {
		t.Fatalf("out = %v, want [%d -1 %d]", out, wantLong, wantShort)
	}
	if !bytes.Equal(seqKV(m.KV(), longPages, len(long)), seqKV(whole.KV(), longPages, len(long))) {
		t.Fatal("long prompt KV differs when split")
	}
	if !bytes.Equal(seqKV(m.KV(), shortPages, len(short)), seqKV(whole.KV(), shortPages, len(short))) {
		t.Fatal("short prompt KV differs when split")
	}
}

// biased returns row k of the last forward's logits with the text bias applied, as
// Forward samples them.
func (m *TinyRef) biased(k int, tokens []int) []float32 {
	lg := slices.Clone(m.buf.logits[k*m.vocab : (k+1)*m.vocab])
	m.addTextBias(lg, tokens[len(tokens)-1], len(tokens))
	return lg
}

// TestForwardOutMayAliasTokens feeds each step's out slice back as the next step's
// tokens, the natural decode loop, and requires the same tokens as with separate slices.
func TestForwardOutMayAliasTokens(t *testing.T) {
	for _, name := range Backends() {
		t.Run(name, func(t *testing.T) {
			run := func(alias bool) []int {
				cfg := DefaultConfig()
				cfg.Backend, cfg.NumPages, cfg.Jitter = name, 32, 0
				b, err := New(cfg)
				require.NoError(t, err)
				out := make([]int, 3)
				batch := make([]SeqInput, 3)
				for i := range batch {
					batch[i] = SeqInput{Tokens: promptIDs(i, 9+i), Pages: pagesFor(i*8, 8), Sample: true}
				}
				var got []int
				for range 10 {
					require.NoError(t, b.Forward(batch, out))
					got = append(got, out...)
					for i := range batch {
						batch[i].Pos += len(batch[i].Tokens)
						if alias {
							batch[i].Tokens = out[i : i+1]
						} else {
							batch[i].Tokens = []int{out[i]}
						}
						if out[i] == TokenEOS {
							batch[i].Tokens = []int{'.'}
						}
					}
				}
				return got
			}
			if a, b := run(true), run(false); !slices.Equal(a, b) {
				t.Fatalf("aliased %v, separate %v", a, b)
			}
		})
	}
}
