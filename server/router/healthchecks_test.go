package router

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The schedule of health-check rounds: the ticks count from the end of the first
// round; a round that ends before its next tick waits for it, one that outlasts it is
// followed at once, and the round after that waits for the first tick after it began.
func TestHealthChecksSchedule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	pool := NewPool([]*WorkerState{NewWorkerState("prefill", "prefill-0", "p:1"), NewWorkerState("decode", "decode-0", "")}, 1, NewRNG(1))
	h := NewHealthChecks(pool, time.Second, 300*time.Millisecond, 2)
	// round runs one round: it begins at begin, the workers answer at ends.
	round := func(begin int, ends ...int) time.Time {
		t.Helper()
		assert.Equal(t, 300*time.Millisecond, h.Begin(at(begin)))
		var next time.Time
		for i, e := range ends {
			_, over, n := h.Answered(i, nil, at(e))
			require.Equal(t, i == len(ends)-1, over, "the round ends with its last answer")
			next = n
		}
		return next
	}
	assert.Equal(t, at(1100), round(0, 50, 100), "first round: the ticks start at its end")
	assert.Equal(t, at(2100), round(1100, 1110, 1120), "a quick round waits for the next tick")
	assert.Equal(t, at(3500), round(2100, 3400, 3500), "a round past its next tick is followed at once")
	assert.Equal(t, at(4100), round(3500, 3510, 3520), "then the first tick after it began")
	h.Begin(at(4100))
	h.Answered(0, nil, at(4110))
	over, next := h.Unanswered(at(4120))
	assert.True(t, over, "a check without an answer ends the round too")
	assert.Equal(t, at(5100), next)
}

// What an answer does: a pass marks the worker healthy at once, threshold failures in a
// row mark it unhealthy, a transport error on a request at once; changed says when.
func TestHealthChecksAnswers(t *testing.T) {
	w := NewWorkerState("decode", "decode-0", "")
	pool := NewPool([]*WorkerState{NewWorkerState("prefill", "prefill-0", "p:1"), w}, 1, NewRNG(1))
	h := NewHealthChecks(pool, time.Second, time.Second, 2)
	now := time.Unix(0, 0)
	down := errors.New("connection refused")
	for _, c := range []struct {
		name             string
		err              error
		changed, healthy bool
	}{
		{"the first pass", nil, true, true},
		{"one failure is tolerated", down, false, true},
		{"the threshold-th in a row marks it down", down, true, false},
		{"further failures change nothing", down, false, false},
		{"a pass brings it back", nil, true, true},
		{"the count restarted", down, false, true},
	} {
		h.Begin(now)
		changed, _, _ := h.Answered(1, c.err, now)
		assert.Equal(t, c.changed, changed, c.name)
		assert.Equal(t, c.healthy, w.Healthy(), c.name)
	}
	assert.True(t, h.MarkDown(1, down), "a transport error marks it down at once")
	assert.False(t, w.Healthy())
	assert.Contains(t, pool.Describe(), "decode-0 unhealthy: connection refused")
	assert.False(t, h.MarkDown(1, down))
}

// NewCore takes the Router's options with its defaults: a core built twice from one
// seed draws the same rooms.
func TestNewCoreFromOptions(t *testing.T) {
	ws := func() []*WorkerState {
		return []*WorkerState{NewWorkerState("prefill", "prefill-0", "p:1"), NewWorkerState("decode", "decode-0", "")}
	}
	a := NewCore(ws(), 1, WithSeed(9), WithMaxRetries(5), WithLogger(nil))
	b := NewCore(ws(), 1, WithSeed(9), WithMaxRetries(5), WithLogger(nil))
	assert.Equal(t, a.Uint64(), b.Uint64())
	assert.Equal(t, 5, a.Flow.MaxRetries)
	assert.Equal(t, DefaultPrefillGrace, a.Flow.PrefillGrace)
	assert.Equal(t, DefaultDeadlineGrace, a.Flow.DeadlineGrace)
	assert.True(t, a.Flow.AbortOnUnhealthy)
	assert.Equal(t, DefaultHealthTimeout, a.Health.Begin(time.Now()))
	assert.Error(t, a.Routable(), "unhealthy until the first check passes")
}
