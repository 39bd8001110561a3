package router

import (
	"context"
	"testing"

	"pdsoak/server/gen"
)

// BenchmarkGenerate serves one request per op through a Router over a prefill and a
// decode fake on loopback (three decode chunks); allocs/op is the router's cost per
// request plus the fakes' (the same fakes before and after a router change).
func BenchmarkGenerate(b *testing.B) {
	p := newFake(b, "127.0.0.1:9001", prefillOK)
	d := newFake(b, "", decodeOK)
	r, err := New([]Worker{{URL: p.srv.URL}}, []Worker{{URL: d.srv.URL}}, WithSeed(1), WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	r.Start()
	defer r.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ch, err := r.Generate(ctx, &gen.Request{ID: "bench", Prompt: []int{1, 2, 3}, MaxTokens: 3})
		if err != nil {
			b.Fatal(err)
		}
		for ev := range ch {
			if ev.Done && ev.Err != nil {
				b.Fatal(ev.Err)
			}
		}
	}
}
