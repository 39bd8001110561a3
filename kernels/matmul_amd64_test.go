//go:build amd64 && !purego

package kernels

import (
	"bytes"
	"slices"
	"testing"
)

// TestTinyRefSameBitsWithoutAssembly runs the model with the AVX2 kernels and with the
// portable Go code and requires identical K/V and logits: a prefill worker and a decode
// worker agree even if only one of them has AVX2.
func TestTinyRefSameBitsWithoutAssembly(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2")
	}
	run := func() ([]float32, []byte) {
		m := newTiny(t, nil)
		prompt := promptIDs(2, 90)
		pages := pagesFor(0, 8)
		m.forward([]SeqInput{{Tokens: prompt, Pages: pages, Sample: true}})
		return slices.Clone(m.buf.logits[:m.vocab]), seqKV(m.KV(), pages, len(prompt))
	}
	la, ka := run()
	useAVX2 = false
	defer func() { useAVX2 = true }()
	lg, kg := run()
	if !slices.Equal(la, lg) || !bytes.Equal(ka, kg) {
		t.Fatal("assembly and Go kernels give different bits")
	}
}
