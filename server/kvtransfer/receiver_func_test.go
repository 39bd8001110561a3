package kvtransfer

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartFunc: the callback gets the transfer's result, once, for a completed
// transfer, a failed dial, a cancellation, the context's end and the receiver's Close;
// never for a Start that fails at once. Such a transfer has no Done channel.
func TestStartFunc(t *testing.T) {
	type got struct {
		calls *atomic.Int32
		ch    chan Result
	}
	start := func(t *testing.T, r *Receiver, ctx context.Context, addr string, room uint64, dst []int32, n int) (*Transfer, got) {
		t.Helper()
		g := got{calls: new(atomic.Int32), ch: make(chan Result, 2)}
		tr, err := r.StartFunc(ctx, addr, room, dst, n, func(res Result) { g.calls.Add(1); g.ch <- res })
		require.NoError(t, err)
		return tr, g
	}
	callback := func(t *testing.T, g got) Result {
		t.Helper()
		select {
		case res := <-g.ch:
			return res
		case <-time.After(waitBound):
			t.Fatalf("no callback within %s", waitBound)
			return Result{}
		}
	}
	check := func(t *testing.T, tr *Transfer, g got) Result {
		t.Helper()
		res := callback(t, g)
		require.Nil(t, tr.Done(), "a StartFunc transfer's Done")
		require.EqualValues(t, 1, g.calls.Load(), "callback calls")
		return res
	}

	t.Run("round trip", func(t *testing.T) {
		p := newPair(t, nil, nil)
		fill(p.src, seq(0, 3), 7)
		tr, g := start(t, p.r, context.Background(), p.s.Addr(), 11, seq(10, 3), 2*tPageSize+1)
		require.NoError(t, p.s.Send(context.Background(), 11, seq(0, 3), 2*tPageSize+1, 99))
		res := check(t, tr, g)
		require.NoError(t, res.Err)
		require.Equal(t, 99, res.FirstToken)
		sameKV(t, p.src, p.dst, seq(0, 3), seq(10, 3), 2*tPageSize+1)
	})
	t.Run("dial fails", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		dead := ln.Addr().String()
		ln.Close()
		r := NewReceiver(newStore(t, tLayers), testOpts()...)
		defer r.Close()
		tr, g := start(t, r, context.Background(), dead, 12, seq(0, 1), 1)
		require.ErrorIs(t, check(t, tr, g).Err, ErrConnection)
	})
	t.Run("cancel", func(t *testing.T) {
		p := newPair(t, nil, nil)
		tr, g := start(t, p.r, context.Background(), p.s.Addr(), 13, seq(0, 1), 2)
		tr.Cancel("test")
		// Cancel's caller may rely on the callback having run when Cancel returns.
		require.EqualValues(t, 1, g.calls.Load(), "callback ran within Cancel")
		require.Error(t, check(t, tr, g).Err)
	})
	t.Run("context", func(t *testing.T) {
		p := newPair(t, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		tr, g := start(t, p.r, ctx, p.s.Addr(), 14, seq(0, 1), 2)
		cancel()
		require.ErrorIs(t, check(t, tr, g).Err, context.Canceled)
	})
	t.Run("close", func(t *testing.T) {
		p := newPair(t, nil, nil)
		tr, g := start(t, p.r, context.Background(), p.s.Addr(), 15, seq(0, 1), 2)
		require.NoError(t, p.r.Close())
		require.Error(t, check(t, tr, g).Err)
	})
	t.Run("bad arguments", func(t *testing.T) {
		r := NewReceiver(newStore(t, tLayers), testOpts()...)
		defer r.Close()
		var calls atomic.Int32
		_, err := r.StartFunc(context.Background(), "127.0.0.1:1", 0, seq(0, 1), 1, func(Result) { calls.Add(1) })
		require.Error(t, err)
		require.NoError(t, r.Close())
		require.Zero(t, calls.Load(), "no callback for a Start that failed")
	})
}
