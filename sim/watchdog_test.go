package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

// TestHealthFailsOnAHeldStep: a simulated worker's /health applies the watchdog rule
// engine.Healthy applies (scheduler.WatchdogErr): under SGLang semantics a step held by
// scheduler_stall that has not returned within --watchdog-timeout (with no output
// meanwhile) fails /health, in the real engine's words, and /health recovers once the
// step returns.
func TestHealthFailsOnAHeldStep(t *testing.T) {
	loop, srv := build(t, "  prefill: 0\n  decode: 0\n  backend: tinyref\n  semantics: sglang\n  args: [--watchdog-timeout=2]")
	w := srv.colocated
	require.NotNil(t, w)
	stop, err := srv.Fault(scenarios.Fault{Name: "f", Type: "scheduler_stall", Target: "colocated"})
	require.NoError(t, err)
	s := submit(loop, srv, "r", 40, 8)
	require.NoError(t, s.err)
	loop.RunUntil(Epoch.Add(time.Second))
	require.NoError(t, w.healthy(), "held for 1s of a 2s watchdog")
	loop.RunUntil(Epoch.Add(3 * time.Second))
	err = w.healthy()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "scheduler: watchdog: a step has run for")
	stop()
	loop.RunUntil(Epoch.Add(4 * time.Second))
	assert.NoError(t, w.healthy(), "the step returned")
}
