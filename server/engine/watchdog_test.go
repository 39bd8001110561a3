package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
)

// TestWatchdogStalledLoop: a scheduler stall (the engine/step failpoint pausing every
// step) with work in flight: new requests are still admitted and queue up, /health turns
// red within the watchdog timeout, /debug/requests still answers, the strict watchdog
// fails the stuck requests with a timeout, and health recovers once the stall clears.
func TestWatchdogStalledLoop(t *testing.T) {
	cfg := DefaultConfig()
	// Long enough that the listing check below runs before the watchdog ends the
	// stuck requests even on a loaded machine (it fires 5 s into the stall: the
	// expected outcome, so the test waits that long).
	cfg.WatchdogTimeout = 5 * time.Second
	e := startEngine(t, newFakeBackend(64, 4), cfg)
	require.NoError(t, failpoint.Enable(failpoint.EngineStep, "pause"))
	t.Cleanup(func() { _ = failpoint.Disable(failpoint.EngineStep) })
	stuck, err := e.Generate(context.Background(), &gen.Request{ID: "stuck", Prompt: []int{0, 5}, MaxTokens: 3, IgnoreEOS: true})
	require.NoError(t, err)
	waitFor(t, "the step to stall", func() bool { st, _ := failpoint.Get(failpoint.EngineStep); return st.Paused == 1 })
	queued, err := e.Generate(context.Background(), &gen.Request{ID: "queued", Prompt: []int{0, 6}, MaxTokens: 3, IgnoreEOS: true})
	if err != nil {
		t.Fatalf("admission during a stall: %v", err)
	}
	waitFor(t, "both requests listed during the stall", func() bool {
		rs := e.Requests()
		return len(rs) == 2 && rs[0].Stage == "running" && rs[1].Stage == "waiting"
	})
	for _, ch := range []<-chan gen.Event{stuck, queued} {
		r := collect(t, ch)
		if !errors.Is(r.done.Err, gen.ErrTimeout) || !strings.Contains(r.done.Err.Error(), "watchdog") {
			t.Fatalf("stuck request ended with %v, want a watchdog timeout", r.done.Err)
		}
	}
	if err := e.Healthy(); err == nil {
		t.Fatal("healthy while the step is stalled")
	}
	require.NoError(t, failpoint.Disable(failpoint.EngineStep))
	waitFor(t, "healthy again", func() bool { return e.Healthy() == nil })
	if r := generate(t, e, &gen.Request{ID: "after", Prompt: []int{0, 5}, MaxTokens: 3, IgnoreEOS: true}); r.done.Err != nil {
		t.Fatalf("after the stall: %v", r.done.Err)
	}
	waitFor(t, "idle", func() bool { return idle(e) })
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
	require.NoError(t, err)
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
