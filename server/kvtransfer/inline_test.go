package kvtransfer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// loopLink is a link on one end of a real loopback connection and the raw other end.
func loopLink(t *testing.T) (*link, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	peer, err := ln.Accept()
	require.NoError(t, err)
	cfg := newConfig(testOpts())
	l := newLink(c, &cfg)
	t.Cleanup(func() { l.kill(ErrClosed); peer.Close() })
	return l, peer
}

// TestEnqueueWritesInline: on an idle link a control message reaches the peer without
// the writer goroutine (none runs here).
func TestEnqueueWritesInline(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("control messages are written inline on linux only")
	}
	l, peer := loopLink(t)
	l.Enqueue(MsgAck, 5, nil)
	require.NoError(t, peer.SetReadDeadline(time.Now().Add(waitBound)))
	h, body, _, err := ReadMessage(peer, nil)
	require.NoError(t, err, "the ACK was not written inline")
	require.Equal(t, MsgAck, h.Type)
	require.EqualValues(t, 5, h.Room)
	require.Empty(t, body)
}

// TestEnqueueKeepsOrderPastFullBuffer: with the peer not reading, messages are written
// inline until the socket's buffer is full (one of them possibly in part), then queued
// for the writer goroutine; the peer gets every byte, in order (heartbeats may come
// between two messages, never inside one).
func TestEnqueueKeepsOrderPastFullBuffer(t *testing.T) {
	l, peer := loopLink(t)
	done := make(chan struct{})
	go func() { defer close(done); l.writeLoop() }()
	defer func() { l.kill(ErrClosed); <-done }()
	const n, size = 1500, 16 << 10 // 24 MiB: more than loopback buffers hold
	body := func(i int) []byte {
		b := bytes.Repeat([]byte{byte(i)}, size)
		binary.BigEndian.PutUint32(b, uint32(i))
		return b
	}
	for i := 1; i <= n; i++ {
		l.Enqueue(MsgFail, uint64(i), body(i))
	}
	if runtime.GOOS == "linux" {
		// The writer goroutine is behind on a full socket: nothing more goes inline.
		require.False(t, l.tryInline(appendMessage(nil, MsgAck, 1, nil)), "an inline write past a full buffer")
	}
	require.NoError(t, peer.SetReadDeadline(time.Now().Add(waitBound)))
	br := bufio.NewReader(peer)
	var buf []byte
	for i := 1; i <= n; i++ {
		h, b, nbuf, err := ReadMessage(br, buf)
		buf = nbuf
		require.NoError(t, err, "message %d", i)
		if h.Type == MsgHeartbeat { // the writer's, between two whole messages
			i--
			continue
		}
		require.Equal(t, MsgFail, h.Type, "message %d", i)
		require.EqualValues(t, i, h.Room, "message %d out of order", i)
		require.Equal(t, body(i), b, "message %d", i)
	}
}
