package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

func TestRetryBootstrap(t *testing.T) {
	pending := []scheduler.Transfer{{Room: 1, Addr: "a"}, {Room: 2, Addr: "b"}, {Room: 3, Addr: "a"}, {Room: 4, Addr: "c"}}
	var asked []string
	start, keep, down := RetryBootstrap(pending, func(addr string) bool {
		asked = append(asked, addr)
		return addr == "b"
	})
	assert.Equal(t, []string{"a", "b", "c"}, asked, "each address is dialled once per round, in order")
	assert.Equal(t, []scheduler.Transfer{{Room: 2, Addr: "b"}}, start)
	assert.Equal(t, []scheduler.Transfer{{Room: 1, Addr: "a"}, {Room: 3, Addr: "a"}, {Room: 4, Addr: "c"}}, keep)
	assert.Equal(t, []string{"a", "c"}, down)
	assert.Equal(t, 600*time.Millisecond, RefusedBootstrapCost)
}

func TestAgeRequests(t *testing.T) {
	t0 := time.Unix(100, 0)
	snap := []gen.RequestInfo{{ID: "x", AgeSeconds: 1, StageAgeSeconds: 0.5}}
	tests := []struct {
		name     string
		snapTime time.Time
		now      time.Time
		want     float64
	}{
		{"aged by the time since the list", t0, t0.Add(1500 * time.Millisecond), 1.5},
		{"never shrunk by a clock behind the list", t0, t0.Add(-time.Second), 0},
		{"no list yet", time.Time{}, t0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AgeRequests(snap, tt.snapTime, tt.now)
			assert.InDelta(t, 1+tt.want, got[0].AgeSeconds, 1e-9)
			assert.InDelta(t, 0.5+tt.want, got[0].StageAgeSeconds, 1e-9)
			assert.Equal(t, 1.0, snap[0].AgeSeconds, "the snapshot itself is not changed")
		})
	}
}

func TestThroughput(t *testing.T) {
	t0 := time.Unix(100, 0)
	var th Throughput
	_, ok := th.Update(t0, 10, true)
	assert.False(t, ok, "the first update only starts the window")
	_, ok = th.Update(t0.Add(500*time.Millisecond), 20, true)
	assert.False(t, ok, "within the window")
	_, ok = th.Update(t0.Add(2*time.Second), 50, false)
	assert.False(t, ok, "gauges frozen (SGLang semantics, no stats refresh)")
	rate, ok := th.Update(t0.Add(2*time.Second), 50, true)
	assert.True(t, ok)
	assert.InDelta(t, 20.0, rate, 1e-9, "40 tokens in 2s")
}

func TestPendBootstraps(t *testing.T) {
	pending := []scheduler.Transfer{{Room: 1}, {Room: 2}}
	rd := &scheduler.Ready{Cancels: []scheduler.Cancel{{Room: 1}}, Transfers: []scheduler.Transfer{{Room: 3}}}
	keep, start := PendBootstraps(append([]scheduler.Transfer(nil), pending...), rd, true)
	assert.Equal(t, []scheduler.Transfer{{Room: 2}, {Room: 3}}, keep, "the bug: new transfers wait for a dial")
	assert.Empty(t, start)
	keep, start = PendBootstraps(append([]scheduler.Transfer(nil), pending...), rd, false)
	assert.Equal(t, []scheduler.Transfer{{Room: 2}}, keep, "a cancelled room leaves pending")
	assert.Equal(t, []scheduler.Transfer{{Room: 3}}, start)
}
