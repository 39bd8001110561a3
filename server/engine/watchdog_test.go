package engine

import (
	"context"
	"strings"
	"testing"

	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
)

// TestWatchdogStalledLoop: a scheduler stall (the engine/step failpoint pausing the loop)
// with work in flight turns Healthy red in strict semantics within the watchdog timeout,
// /debug/requests still answers, and health recovers once the stall clears.
func TestWatchdogStalledLoop(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WatchdogTimeout = 50e6 // 50ms
	e := startEngine(t, newFakeBackend(64, 4), cfg)
	if err := failpoint.Enable(failpoint.EngineStep, "pause"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = failpoint.Disable(failpoint.EngineStep) })
	ch, err := e.Generate(context.Background(), &gen.Request{ID: "stuck", Prompt: []int{0, 5}, MaxTokens: 3, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "unhealthy", func() bool {
		err := e.Healthy()
		return err != nil && strings.Contains(err.Error(), "no progress")
	})
	if rs := e.Requests(); len(rs) != 1 || rs[0].ID != "stuck" {
		t.Fatalf("requests during the stall: %+v", rs)
	}
	if err := failpoint.Disable(failpoint.EngineStep); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, ch); r.done.Err != nil || len(r.tokens) != 3 {
		t.Fatalf("after the stall: %d tokens, %v", len(r.tokens), r.done.Err)
	}
	waitFor(t, "healthy again", func() bool { return e.Healthy() == nil })
}

// TestWatchdogSGLangIdleStall: SGLang semantics report healthy while requests sit in a
// queue that never moves, because its watchdog only watches running batches.
func TestWatchdogSGLangIdleStall(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Semantics = SemanticsSGLang
	cfg.WatchdogTimeout = 20e6
	cfg.ReservedDecodeTokens = 0
	pd := startPD(t, newFakeBackend(64, 4), newFakeBackend(64, 4), DefaultConfig(), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	// A decode leg whose prefill never sends: it sits in the transfer queue forever.
	ch, err := pd.decode.Generate(ctx, &gen.Request{ID: "t", Prompt: []int{0, 5}, MaxTokens: 3,
		Bootstrap: &gen.Bootstrap{Room: 9, Addr: "p:1"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "transfer", func() bool {
		rs := pd.decode.Requests()
		return len(rs) == 1 && rs[0].Stage == "transfer" && rs[0].AgeSeconds > 0.05
	})
	if err := pd.decode.Healthy(); err != nil {
		t.Fatalf("sglang health: %v", err)
	}
	cancel()
	collect(t, ch)
}
