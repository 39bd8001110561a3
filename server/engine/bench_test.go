package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"pdsoak/server/gen"
)

// BenchmarkEngineStreams256 pushes 256 concurrent streams of 64 tokens through the
// engine loop on a zero-cost backend: the cost the driver adds per generated token
// (admission round trip, scheduling, delivery to 256 channels). Reported as ns/token.
func BenchmarkEngineStreams256(b *testing.B) {
	fb := newFakeBackend(256*8, 16)
	cfg := DefaultConfig()
	cfg.MaxRunningRequests, cfg.MaxQueuedRequests = 256, 0
	e, err := New(fb, cfg, WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	e.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		_ = e.Shutdown(ctx)
	}()
	const streams, tokens = 256, 64
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ch, err := e.Generate(context.Background(), &gen.Request{ID: "bench", Prompt: []int{0, 2 + i%60, 3, 4},
					MaxTokens: tokens, IgnoreEOS: true})
				if err != nil {
					b.Error(err)
					return
				}
				n := 0
				for ev := range ch {
					n += len(ev.Tokens)
				}
				if n != tokens {
					b.Errorf("%d tokens", n)
				}
			}()
		}
		wg.Wait()
	}
	el := time.Since(start)
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*streams*tokens), "ns/token")
	b.ReportMetric(float64(b.N*streams*tokens)/el.Seconds(), "tokens/s")
}
