package kvtransfer

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

// bigStore holds rooms of up to 4 MiB: big enough for Send to checksum ahead.
func bigStore(t *testing.T) *kernels.KVStore {
	t.Helper()
	s, err := kernels.NewKVStore(64, 16, 4, 1024)
	require.NoError(t, err)
	return s
}

func TestFrameSourceAheadMatchesInline(t *testing.T) {
	s := bigStore(t)
	src := seq(0, 64)
	fill(s, src, 3)
	for _, numTokens := range []int{64 * 16, 64*16 - 5, 33 * 16} {
		fs := newFrameSource(s, src, numTokens)
		require.NotNil(t, fs.entries, "%d tokens: checksummed ahead", numTokens)
		for i := range NumFrames(s.PageSize, s.Layers, numTokens) {
			e, p := fs.frame(i)
			we, wp := Frame(s, src, numTokens, i)
			require.Equal(t, we, e, "frame %d", i)
			require.Equal(t, wp, p, "frame %d", i)
		}
		fs.close()
	}
	small := newFrameSource(s, src, 16) // one page: inline
	require.Nil(t, small.entries)
	small.close()
}

// bigPair is a sender (with hook) and a receiver over two big stores on loopback; the
// caller closes them (Cleanup, or at once when it reruns).
func bigPair(t *testing.T, hook Hook) (src, dst *kernels.KVStore, s *Sender, r *Receiver) {
	t.Helper()
	src, dst = bigStore(t), bigStore(t)
	s = NewSender(src, append(testOpts(), WithHook(hook))...)
	require.NoError(t, s.Listen("127.0.0.1:0"))
	r = NewReceiver(dst, testOpts()...)
	return src, dst, s, r
}

func TestBigRoomRoundTrip(t *testing.T) {
	var n atomic.Int32
	hook := func(ctx context.Context, name string) (string, error) {
		if name == HookSendFrame && ctx.Value(corruptKey{}) != nil && n.Add(1) == 200 {
			return HookCorrupt, nil // a frame of the second batch, checksummed ahead
		}
		return "", nil
	}
	src, dst, s, r := bigPair(t, hook)
	t.Cleanup(func() { r.Close(); s.Close() })
	pages := seq(0, 64)
	fill(src, pages, 9)
	const tokens = 64*16 - 3

	tr, err := r.Start(context.Background(), s.Addr(), 1, pages, tokens)
	require.NoError(t, err)
	require.NoError(t, s.Send(context.Background(), 1, pages, tokens, 7))
	require.NoError(t, wait(t, tr).Err)
	sameKV(t, src, dst, pages, pages, tokens)

	tr, err = r.Start(context.Background(), s.Addr(), 2, pages, tokens)
	require.NoError(t, err)
	ctx := context.WithValue(context.Background(), corruptKey{}, uint64(2))
	require.ErrorIs(t, s.Send(ctx, 2, pages, tokens, 7), ErrPeer)
	require.ErrorIs(t, wait(t, tr).Err, ErrChecksum)
}

// A Send that ends early stops its checksum goroutine before it returns: the caller may
// write the pages at once (the race detector watches).
func TestBigRoomEndedEarlyLeavesPagesAlone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	hook := func(_ context.Context, name string) (string, error) {
		if name == HookSendFrame && n.Add(1) == 10 {
			cancel()
		}
		return "", nil
	}
	src, _, s, r := bigPair(t, hook)
	t.Cleanup(func() { r.Close(); s.Close() })
	pages := seq(0, 64)
	tr, err := r.Start(context.Background(), s.Addr(), 5, pages, 64*16)
	require.NoError(t, err)
	require.ErrorIs(t, s.Send(ctx, 5, pages, 64*16, 1), context.Canceled)
	fill(src, pages, 11) // the engine reuses the pages
	require.Error(t, wait(t, tr).Err)
}

// A big room cancelled mid-transfer has its pages back when Cancel returns (the race
// detector watches the write below), and the connection carries the next room.
func TestBigRoomCancelledMidTransfer(t *testing.T) {
	for round := range 5 {
		var frames atomic.Int32
		second := make(chan struct{})
		hook := func(_ context.Context, name string) (string, error) {
			if name == HookSendFrame && frames.Add(1) == 130 { // the second batch is under way
				close(second)
			}
			return "", nil
		}
		src, dst, s, r := bigPair(t, hook)
		pages := seq(0, 64)
		fill(src, pages, uint64(round))
		tr, err := r.Start(context.Background(), s.Addr(), 1, pages, 64*16)
		require.NoError(t, err)
		sent := make(chan error, 1)
		go func() { sent <- s.Send(context.Background(), 1, pages, 64*16, 1) }()
		<-second
		tr.Cancel("test")
		fill(dst, pages, 99) // the engine reuses the pages at once
		require.ErrorIs(t, wait(t, tr).Err, gen.ErrTransfer)
		require.Error(t, <-sent)

		next, err := r.Start(context.Background(), s.Addr(), 2, pages, 64*16)
		require.NoError(t, err)
		require.NoError(t, s.Send(context.Background(), 2, pages, 64*16, 1))
		require.NoError(t, wait(t, next).Err)
		sameKV(t, src, dst, pages, pages, 64*16)
		r.Close()
		s.Close()
	}
}
