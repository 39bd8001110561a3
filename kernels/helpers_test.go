package kernels

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// newTiny builds a tinyref backend from the default config with edits applied.
func newTiny(t testing.TB, edit func(*Config)) *TinyRef {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NumPages = 512
	if edit != nil {
		edit(&cfg)
	}
	b, err := New(cfg)
	require.NoError(t, err)
	return b.(*TinyRef)
}

// pagesFor returns a page table of n pages starting at page first.
func pagesFor(first, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(first + i)
	}
	return p
}

// promptIDs is a deterministic prompt of n tokens, different for each seed.
func promptIDs(seed, n int) []int {
	var tk Tokenizer
	s := ""
	for len(s) < n {
		s += fmt.Sprintf("Request %d asks about topic %d, then waits. ", seed, len(s)*31+seed)
	}
	return tk.EncodeWithBOS(s[:n-1])
}

// generate prefills prompt on pages and decodes until maxNew tokens or EOS.
func generate(t testing.TB, b Backend, prompt []int, pages []int32, sp Sampling, maxNew int) []int {
	t.Helper()
	out := []int{0}
	require.NoError(t, b.Forward([]SeqInput{{Tokens: prompt, Pages: pages, Sample: true, Sampling: sp}}, out))
	gen := []int{out[0]}
	pos := len(prompt)
	for len(gen) < maxNew && gen[len(gen)-1] != TokenEOS {
		require.NoError(t, b.Forward([]SeqInput{{Tokens: gen[len(gen)-1:], Pos: pos, Pages: pages, Sample: true, Sampling: sp}}, out))
		pos++
		gen = append(gen, out[0])
	}
	return gen
}

// seqKV copies the cache bytes of positions [0, n) of a sequence, all layers.
func seqKV(kv *KVStore, pages []int32, n int) []byte {
	var out []byte
	per := kv.BytesPerToken
	for l := 0; l < kv.Layers; l++ {
		for p := 0; p < n; p++ {
			b := kv.LayerBytes(pages[p/kv.PageSize], l)
			off := (p % kv.PageSize) * per
			out = append(out, b[off:off+per]...)
		}
	}
	return out
}
