package judge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

func TestDrainEvent(t *testing.T) {
	tests := []struct {
		name        string
		drained     bool
		interrupted bool
		want        string
	}{
		{"drained", true, false, "all requests resolved 1.234s after load stopped"},
		{"cancelled", false, false, "3 requests still in flight after 30s; cancelled"},
		{"interrupted", false, true, "interrupted: 3 requests still in flight after 30s; cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := DrainEvent(tt.drained, 3, 1234400*time.Microsecond, 30*time.Second, tt.interrupted)
			assert.Equal(t, ledger.EventDrain, ev.Type)
			assert.Equal(t, tt.want, ev.Detail)
			require.NotNil(t, ev.Passed)
			assert.Equal(t, tt.drained, *ev.Passed)
			assert.Equal(t, 3, ev.InFlight)
		})
	}
	assert.Equal(t, 2*time.Second, DrainBound(30*time.Second, 2*time.Second, true))
	assert.Equal(t, 30*time.Second, DrainBound(30*time.Second, 2*time.Second, false))
}

func TestLeakCheckEvent(t *testing.T) {
	started := time.Unix(10, 0)
	ev := LeakCheckEvent(started, LeakVerdict{Detail: LeakNoMetrics})
	assert.Nil(t, ev.Passed, "not evaluated: neither a pass nor a fail")
	assert.Equal(t, started, *ev.Started)
	ev = LeakCheckEvent(started, LeakVerdict{Evaluated: true, Residual: map[string]float64{"d/x": 1}, Detail: "not drained"})
	require.NotNil(t, ev.Passed)
	assert.False(t, *ev.Passed)
	assert.Equal(t, map[string]float64{"d/x": 1}, ev.Metrics)
}

func TestSampleAndSelfCheckEvents(t *testing.T) {
	ev := SampleEvent("decode-0", map[string]float64{"sglang:num_running_reqs": 2, "sglang:token_usage": 0.5, "other": 9})
	assert.Equal(t, map[string]float64{"sglang:num_running_reqs": 2, "sglang:token_usage": 0.5}, ev.Metrics)
	assert.Equal(t, "decode-0", ev.Source)
	sc := SelfCheck{Passed: false, SendP99: 3 * time.Millisecond, TickP99: 5 * time.Millisecond, SendMax: 9 * time.Millisecond}
	ev = sc.Event()
	assert.False(t, *ev.Passed)
	assert.InDelta(t, 0.005, ev.LagP99, 1e-12)
	assert.InDelta(t, 0.009, ev.LagMax, 1e-12)
	assert.Contains(t, ev.Detail, "harness was the bottleneck")
}
