package kvtransfer

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSendRoomsAckBound: after DONE the machine's ACK timer ends the Send with
// ErrTimeout and FAILs the room to decode; an ACK (Ended) in time disarms it.
func TestSendRoomsAckBound(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	m, c := NewSendRooms(4, 8, nil), &recConn{}
	var expired []error
	m.AckBound(clock, 2*time.Second, func(r *SendRoom, step uint64) {
		if err := m.AckExpired(r, step); err != nil {
			expired = append(expired, err)
			m.Ended(r, err)
		}
	})
	for _, room := range []uint64{1, 2} {
		_, refused := m.Register(c, room, Register{NumTokens: 4, Pages: []int32{0}}, "d")
		require.Empty(t, refused)
		_, err := m.Claim(room)
		require.NoError(t, err)
	}
	c.take()
	m.AwaitAck(m.Get(1))
	m.AwaitAck(m.Get(2))
	clock.Advance(1900 * time.Millisecond)
	r2 := m.Acked(c, 2)
	require.NotNil(t, r2)
	m.Ended(r2, nil)
	clock.Advance(200 * time.Millisecond)
	require.Len(t, expired, 1)
	assert.ErrorIs(t, expired[0], ErrTimeout)
	assert.Contains(t, expired[0].Error(), "room 1: no ACK from decode within 2s")
	msgs := c.take()
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], "FAIL 1 ")
	_, err := m.Claim(1)
	assert.ErrorIs(t, err, ErrPeer, "the timed-out room is tombstoned")
	clock.Advance(time.Minute)
	assert.Len(t, expired, 1, "the ACKed room's timer was stopped")

	t.Run("unbounded", func(t *testing.T) {
		m, c := NewSendRooms(4, 8, nil), &recConn{}
		m.AckBound(clock, 0, func(*SendRoom, uint64) { t.Fatal("no bound, no timer") })
		m.Register(c, 3, Register{NumTokens: 4, Pages: []int32{0}}, "d")
		r, _ := m.Claim(3)
		m.AwaitAck(r)
		clock.Advance(time.Hour)
	})
}

// TestSenderAckTimeout: a decode that takes the frames and DONE but never ACKs (its
// heartbeats keep the connection alive) fails the Send with ErrTimeout, and the room
// gets FAIL on the wire.
func TestSenderAckTimeout(t *testing.T) {
	src := newStore(t, tLayers)
	s := NewSender(src, testOpts(WithAckTimeout(200*time.Millisecond))...)
	c := rawDecode(t, s, 9)
	go heartbeat(c)
	fails := make(chan string, 1)
	go func() { // decode's reader: the bytes it gets hold the room's FAIL
		var got []byte
		b := make([]byte, 4096)
		c.SetReadDeadline(time.Now().Add(waitBound))
		for {
			n, err := c.Read(b)
			got = append(got, b[:n]...)
			if i := bytes.Index(got, []byte("no ACK")); i >= 0 {
				fails <- string(got[i:])
				return
			}
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	err := s.Send(ctx, 9, []int32{2}, 3, 5)
	require.ErrorIs(t, err, ErrTimeout)
	assert.Contains(t, err.Error(), "no ACK from decode within 200ms")
	select {
	case reason := <-fails:
		assert.Contains(t, reason, "no ACK")
	case <-time.After(waitBound):
		t.Fatal("no FAIL for the room")
	}
}

// TestSendRoomsOnRegister: what a REGISTER comes to after the bootstrap hook, as the
// Sender and the sim both carry it out.
func TestSendRoomsOnRegister(t *testing.T) {
	body := AppendRegister(nil, Register{NumTokens: 4, Pages: []int32{0}})
	m, c := NewSendRooms(4, 8, nil), &recConn{}

	_, err := m.OnRegister(c, 1, body, "d", HookDrop, nil)
	assert.ErrorIs(t, err, ErrConnection, "drop closes the connection")
	assert.Empty(t, c.take())

	waiting, err := m.Claim(2) // a Send waits for room 2
	require.NoError(t, err)
	ev, err := m.OnRegister(c, 2, body, "d", HookFail, nil)
	require.NoError(t, err)
	assert.Nil(t, ev.Room)
	assert.Same(t, waiting, ev.Failed)
	assert.ErrorIs(t, ev.FailErr, ErrPeer)
	assert.Contains(t, ev.Refused, "bootstrap refused by hook")
	assert.Equal(t, []string{"FAIL 2 " + ev.Refused}, c.take())
	_, err = m.Claim(2)
	assert.ErrorIs(t, err, ErrPeer, "tombstoned")

	_, err = m.OnRegister(c, 3, []byte{1}, "d", "", nil)
	assert.Error(t, err, "a malformed REGISTER closes the connection")

	ev, err = m.OnRegister(c, 4, body, "d", "", nil)
	require.NoError(t, err)
	require.NotNil(t, ev.Room)
	assert.Equal(t, 4, ev.Room.Reg.NumTokens)
	assert.Equal(t, []string{"REGISTER_ACK 4"}, c.take())
}

// TestSenderEarlyAckIsNoSuccess: an ACK that arrives before the room's DONE (a decode
// out of step) does not end its Send in success: not every frame was sent, and the
// frames still pending on the link point at pages the caller gets back (only a Send
// that fails forgets them).
func TestSenderEarlyAckIsNoSuccess(t *testing.T) {
	src := newStore(t, tLayers)
	// The first frame waits until the room ended (the hook's context ends with it):
	// the ACK is handled mid-transfer, never after DONE.
	hook := func(ctx context.Context, name string) (string, error) {
		if name == HookSendFrame {
			select {
			case <-ctx.Done():
			case <-time.After(waitBound):
			}
		}
		return "", nil
	}
	s := NewSender(src, testOpts(WithHook(hook))...)
	c := rawDecode(t, s, 9)
	go heartbeat(c)
	go drain(c)
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	sent := make(chan error, 1)
	go func() { sent <- s.Send(ctx, 9, []int32{2}, 3, 5) }()
	c.Write(appendMessage(nil, MsgAck, 9, nil))
	err := <-sent
	require.ErrorIs(t, err, ErrProtocol)
}
