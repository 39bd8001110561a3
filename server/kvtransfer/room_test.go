package kvtransfer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/failpoint"
)

func TestTombstones(t *testing.T) {
	tb := NewTombstones(2)
	tb.Add(1, "first")
	tb.Add(1, "again") // the first reason stays, and takes no second slot
	tb.Add(2, "second")
	r, ok := tb.Failed(1)
	assert.True(t, ok)
	assert.Equal(t, "first", r)
	tb.Add(3, "third") // the ring is full: the oldest goes
	_, ok = tb.Failed(1)
	assert.False(t, ok, "room 1 forgotten")
	for _, room := range []uint64{2, 3} {
		_, ok := tb.Failed(room)
		assert.True(t, ok, "room %d remembered", room)
	}
	none := NewTombstones(0)
	none.Add(7, "x")
	_, ok = none.Failed(7)
	assert.False(t, ok, "n = 0 remembers nothing")
}

func TestStepTimeoutError(t *testing.T) {
	err := StepTimeoutError(42, StepNextFrame, 3*time.Second)
	assert.True(t, errors.Is(err, ErrTimeout))
	assert.Contains(t, err.Error(), "room 42: no next frame within 3s")
}

// TestBootstrapStallEndsOnTheRegisterAckBound: a prefill whose bootstrap hook holds
// every REGISTER (bootstrap_stall) fails decode's room at the handshake bound, naming
// StepRegisterAck; the simulator's KV link arms the same bound.
func TestBootstrapStallEndsOnTheRegisterAckBound(t *testing.T) {
	reg := failpoint.NewRegistry()
	require.NoError(t, reg.Enable(HookBootstrap, "pause"))
	defer reg.Disable(HookBootstrap)
	p := newPair(t, []Option{WithHook(reg.Eval)}, shortTimeouts())
	tr, err := p.r.Start(context.Background(), p.s.Addr(), 9, seq(0, 2), 8)
	require.NoError(t, err)
	res := wait(t, tr)
	require.ErrorIs(t, res.Err, ErrTimeout)
	assert.Contains(t, res.Err.Error(), "no "+StepRegisterAck+" within")
}
