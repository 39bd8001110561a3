package kernels_test

import (
	"fmt"
	"strings"

	"pdsoak/kernels"
)

// A server describes the model, sizes the pool, builds the backend, then drives it one
// step at a time: a prefill of the prompt, then one decode step per token.
func ExampleNew() {
	cfg := kernels.DefaultConfig()
	info, err := kernels.Describe(cfg)
	if err != nil {
		panic(err)
	}
	cfg.NumPages = 64 // e.g. from info.ModelKVBytesPerToken and a memory budget
	b, err := kernels.New(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Name, info.VocabSize, info.KVBytesPerTokenPerLayer, info.ModelKVBytesPerToken)

	var tok kernels.Tokenizer
	prompt := tok.EncodeWithBOS("Once upon a time")
	pages := []int32{0, 1, 2, 3}
	dec := tok.NewStreamDecoder()
	var text strings.Builder
	out := []int{0}
	in := []kernels.SeqInput{{Tokens: prompt, Pages: pages, Sample: true}}
	for pos := len(prompt); pos < len(prompt)+40; pos++ {
		if err := b.Forward(in, out); err != nil {
			panic(err)
		}
		if out[0] == info.EOS {
			break
		}
		text.WriteString(dec.Push(out[0]))
		in[0] = kernels.SeqInput{Tokens: []int{out[0]}, Pos: pos, Pages: pages, Sample: true}
	}
	text.WriteString(dec.Flush())
	fmt.Printf("%q\n", text.String())
	// Output:
	// ref 264 512 1024
	// "sth theees and weer. astes ar. as wheand"
}

func ExampleStreamDecoder() {
	var tok kernels.Tokenizer
	d := tok.NewStreamDecoder()
	for _, id := range tok.Encode("€!") {
		fmt.Printf("%q ", d.Push(id))
	}
	fmt.Printf("%q\n", d.Flush())
	// Output: "" "" "€" "!" ""
}
