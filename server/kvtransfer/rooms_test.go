package kvtransfer

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// recConn records the control messages a machine sends (kvtransfer.Conn).
type recConn struct{ msgs []string }

func (c *recConn) Enqueue(t MsgType, room uint64, body []byte) {
	m := fmt.Sprintf("%s %d", t, room)
	if t == MsgFail {
		m += " " + string(body)
	}
	c.msgs = append(c.msgs, m)
}

func (c *recConn) take() []string { m := c.msgs; c.msgs = nil; return m }

// fakeClock is a manual clock: Advance fires the timers that are due, in order.
type fakeClock struct {
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool { was := !t.stopped; t.stopped = true; return was }

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (c *fakeClock) Advance(d time.Duration) {
	end := c.now.Add(d)
	for {
		slices.SortStableFunc(c.timers, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			break
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		c.now = t.at
		if !t.stopped {
			t.stopped = true
			t.f()
		}
	}
	c.now = end
}

func TestSendRoomsRegister(t *testing.T) {
	m := NewSendRooms(4, 8, nil)
	c := &recConn{}
	r, refused := m.Register(c, 1, Register{NumTokens: 8, Pages: []int32{3, 4}}, "decode")
	require.NotNil(t, r)
	assert.Empty(t, refused)
	assert.Equal(t, []string{"REGISTER_ACK 1"}, c.take())
	assert.Equal(t, Registration{Room: 1, NumTokens: 8, DestPages: []int32{3, 4}, Peer: "decode"}, r.Reg)

	tests := []struct {
		name string
		room uint64
		reg  Register
		want string
	}{
		{"too few pages", 2, Register{NumTokens: 9, Pages: []int32{1, 2}}, "2 pages cannot hold 9 tokens of page size 4"},
		{"duplicate", 1, Register{NumTokens: 8, Pages: []int32{3, 4}}, ErrDuplicate.Error()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, refused := m.Register(c, tc.room, tc.reg, "decode")
			assert.Nil(t, r)
			assert.Equal(t, tc.want, refused)
			assert.Equal(t, []string{fmt.Sprintf("FAIL %d %s", tc.room, tc.want)}, c.take())
		})
	}
	t.Run("tombstoned", func(t *testing.T) {
		got, err := m.Fail(5, "aborted")
		assert.Nil(t, got, "unknown room")
		assert.NoError(t, err)
		r, refused := m.Register(c, 5, Register{NumTokens: 1, Pages: []int32{0}}, "decode")
		assert.Nil(t, r)
		assert.Equal(t, RefusedRegisterReason("aborted"), refused)
	})
}

func TestSendRoomsEnds(t *testing.T) {
	reg := Register{NumTokens: 4, Pages: []int32{0}}
	t.Run("decode fails a room no Send carries: abandoned, tombstoned", func(t *testing.T) {
		m, c := NewSendRooms(4, 8, nil), &recConn{}
		m.Register(c, 1, reg, "d")
		r, _, _ := m.PeerFailed(&recConn{}, 1, "x")
		assert.Nil(t, r, "FAIL from another connection is ignored")
		r, abandoned, err := m.PeerFailed(c, 1, "timeout")
		require.NotNil(t, r)
		assert.ErrorIs(t, err, ErrPeer)
		assert.Equal(t, "decode: timeout", abandoned)
		assert.Nil(t, m.Get(1))
		_, err = m.Claim(1)
		assert.ErrorIs(t, err, ErrPeer, "a later Send is refused")
	})
	t.Run("decode fails a room a Send carries: the Send ends", func(t *testing.T) {
		m, c := NewSendRooms(4, 8, nil), &recConn{}
		m.Register(c, 1, reg, "d")
		sr, err := m.Claim(1)
		require.NoError(t, err)
		_, err = m.Claim(1)
		assert.ErrorIs(t, err, ErrDuplicate)
		r, abandoned, err := m.PeerFailed(c, 1, "checksum")
		assert.Same(t, sr, r)
		assert.ErrorIs(t, err, ErrPeer)
		assert.Empty(t, abandoned, "the Send reports it")
		m.Ended(r, err)
		assert.Nil(t, m.Get(1))
	})
	t.Run("connection lost: every room of it, in order", func(t *testing.T) {
		m, c, other := NewSendRooms(4, 8, nil), &recConn{}, &recConn{}
		for _, room := range []uint64{9, 3, 5} {
			m.Register(c, room, reg, "d")
		}
		m.Register(other, 7, reg, "d")
		m.Claim(5)
		lost := m.ConnLost(c, ErrConnection, nil)
		var rooms []uint64
		for _, r := range lost {
			rooms = append(rooms, r.Room)
		}
		assert.Equal(t, []uint64{3, 5, 9}, rooms)
		assert.NotNil(t, m.Get(5), "the Send ends it")
		assert.Nil(t, m.Get(3))
		assert.NotNil(t, m.Get(7), "another connection's room stays")
		_, err := m.Claim(3)
		assert.ErrorIs(t, err, ErrPeer, "tombstoned")
	})
	t.Run("prefill fails a registered room: FAIL to decode", func(t *testing.T) {
		m, c := NewSendRooms(4, 8, nil), &recConn{}
		m.Register(c, 1, reg, "d")
		c.take()
		r, err := m.Fail(1, "aborted")
		require.NotNil(t, r)
		assert.ErrorIs(t, err, ErrPeer)
		assert.Equal(t, []string{"FAIL 1 aborted"}, c.take())
	})
	t.Run("shape check FAILs the room", func(t *testing.T) {
		m, c := NewSendRooms(4, 8, nil), &recConn{}
		r, _ := m.Register(c, 1, reg, "d")
		c.take()
		assert.NoError(t, m.Check(r, []int32{2}, 4, 7, 3))
		for _, bad := range []struct {
			src         []int32
			tokens, tok int
		}{{[]int32{2}, 5, 7}, {[]int32{2}, 4, -1}, {[]int32{3}, 4, 7}, {nil, 4, 7}} {
			assert.ErrorIs(t, m.Check(r, bad.src, bad.tokens, bad.tok, 3), ErrShape)
		}
		assert.Len(t, c.take(), 4)
	})
}

func TestSendRoomsTombstonesAreBounded(t *testing.T) {
	m := NewSendRooms(4, 2, nil)
	for room := uint64(1); room <= 3; room++ {
		m.Fail(room, "x")
	}
	_, err := m.Claim(1)
	assert.NoError(t, err, "room 1 fell out of the ring")
	_, err = m.Claim(3)
	assert.ErrorIs(t, err, ErrPeer)
}

func newTestRecv(clock *fakeClock, cfg RecvConfig) *RecvRooms {
	var m *RecvRooms
	m = NewRecvRooms(clock, cfg, func(r *RecvRoom, step uint64) {
		if err := m.Expire(r, step); err != nil {
			m.End(r, err, true)
			r.Owner = err
		}
	})
	return m
}

var recvCfg = RecvConfig{PageSize: 4, Layers: 2, BytesPerToken: 8, NumPages: 16,
	Handshake: time.Second, Waiting: 3 * time.Second, Progress: 2 * time.Second}

func newEP() *Endpoint { return &Endpoint{} }

func TestRecvRoomsSteps(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	m := newTestRecv(clock, recvCfg)
	r := &RecvRoom{}
	ep, dial, err := m.Start(r, "p:1", 7, []int32{1, 2}, 6, newEP)
	require.NoError(t, err)
	assert.True(t, dial)
	c := &recConn{}
	m.Connected(ep, c)
	assert.Equal(t, []string{"REGISTER 7"}, c.take())
	_, _, err = m.Start(&RecvRoom{}, "p:1", 7, []int32{1, 2}, 6, newEP)
	assert.ErrorIs(t, err, ErrDuplicate)

	clock.Advance(900 * time.Millisecond)
	m.RegisterAck(ep, 7) // the first-frame bound replaces the handshake's
	clock.Advance(2900 * time.Millisecond)
	require.True(t, r.Live)
	for _, e := range []Entry{{Page: 0, Layer: 0, Len: 32}, {Page: 0, Layer: 1, Len: 32}} {
		require.NoError(t, m.CheckFrame(r, e))
	}
	assert.ErrorIs(t, m.CheckFrame(r, Entry{Page: 0, Layer: 1, Len: 32}), ErrProtocol, "duplicate")
	assert.ErrorIs(t, m.CheckFrame(r, Entry{Page: 1, Layer: 0, Len: 32}), ErrProtocol, "the last page holds 2 tokens")
	m.Progress(r, 2, 64)
	clock.Advance(1500 * time.Millisecond)
	require.NoError(t, m.CheckFrame(r, Entry{Page: 1, Layer: 0, Len: 16}))
	m.Progress(r, 1, 16) // restarts the next-frame bound without a new timer
	clock.Advance(1500 * time.Millisecond)
	require.True(t, r.Live, "progress within the bound")
	d, err := m.Done(ep, 7, Done{Frames: 4, NumTokens: 6})
	assert.Same(t, r, d)
	assert.ErrorIs(t, err, ErrProtocol, "DONE after 3 of 4 frames")
	clock.Advance(600 * time.Millisecond)
	assert.False(t, r.Live)
	assert.ErrorIs(t, r.Owner.(error), ErrTimeout)
	assert.Contains(t, r.Owner.(error).Error(), "no "+StepNextFrame+" within 2s")
	assert.Equal(t, []string{"FAIL 7 " + r.Owner.(error).Error()}, c.take())
	assert.Nil(t, m.Get(7))
}

func TestRecvRoomsDoneAndBounds(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	m := newTestRecv(clock, recvCfg)
	c := &recConn{}
	r := &RecvRoom{}
	ep, _, err := m.Start(r, "p:1", 1, []int32{5}, 4, newEP)
	require.NoError(t, err)
	m.Connected(ep, c)
	for l := range uint32(2) {
		require.NoError(t, m.CheckFrame(r, Entry{Page: 0, Layer: l, Len: 32}))
	}
	m.Progress(r, 2, 64)
	got, err := m.Done(ep, 1, Done{FirstToken: 9, Frames: 2, NumTokens: 4})
	require.NoError(t, err)
	assert.Same(t, r, got)
	assert.False(t, r.Live)
	assert.Equal(t, []string{"REGISTER 1", "ACK 1"}, c.take())
	clock.Advance(time.Minute)
	assert.Nil(t, r.Owner, "no timer fires on an ended room")

	t.Run("handshake bound", func(t *testing.T) {
		r := &RecvRoom{}
		_, dial, err := m.Start(r, "p:1", 2, []int32{5}, 4, newEP)
		require.NoError(t, err)
		assert.False(t, dial, "the endpoint is connected")
		clock.Advance(time.Second)
		assert.Contains(t, r.Owner.(error).Error(), "no "+StepRegisterAck+" within 1s")
	})
	t.Run("bad arguments", func(t *testing.T) {
		for _, tc := range []struct {
			room   uint64
			dest   []int32
			tokens int
			want   error
		}{{0, []int32{1}, 1, gen.ErrInvalid}, {3, []int32{1}, 5, ErrShape}, {3, []int32{16}, 1, ErrShape}, {3, nil, 0, ErrShape}} {
			_, _, err := m.Start(&RecvRoom{}, "p:1", tc.room, tc.dest, tc.tokens, newEP)
			assert.ErrorIs(t, err, tc.want)
		}
	})
}

func TestRecvRoomsLostAndStale(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) {
			cfg := recvCfg
			cfg.StaleEndpoints = stale
			clock := &fakeClock{now: time.Unix(0, 0)}
			m := newTestRecv(clock, cfg)
			var ep *Endpoint
			for _, room := range []uint64{4, 2} {
				r := &RecvRoom{}
				e, _, err := m.Start(r, "p:1", room, []int32{1}, 1, newEP)
				require.NoError(t, err)
				ep = e
			}
			m.Connected(ep, &recConn{})
			lost := m.Lost(ep)
			require.Len(t, lost, 2)
			assert.Equal(t, []uint64{2, 4}, []uint64{lost[0].Room, lost[1].Room})
			for _, r := range lost {
				err := LostRoomError(r.Room, "p:1", ErrConnection)
				assert.True(t, m.End(r, err, false))
				assert.False(t, m.End(r, err, false), "once")
			}
			e2, dial, err := m.Start(&RecvRoom{}, "p:1", 9, []int32{1}, 1, newEP)
			require.NoError(t, err)
			assert.Equal(t, !stale, dial, "a stale endpoint keeps its dead connection")
			assert.Equal(t, stale, e2 == ep)
		})
	}
	t.Run("a failed dial is never kept", func(t *testing.T) {
		cfg := recvCfg
		cfg.StaleEndpoints = true
		m := newTestRecv(&fakeClock{}, cfg)
		ep, _, err := m.Start(&RecvRoom{}, "p:1", 1, []int32{1}, 1, newEP)
		require.NoError(t, err)
		require.Len(t, m.Lost(ep), 1)
		_, dial, _ := m.Start(&RecvRoom{}, "p:1", 2, []int32{1}, 1, newEP)
		assert.True(t, dial)
	})
}

func TestRecvRoomsPeerFailAndCancel(t *testing.T) {
	m := newTestRecv(&fakeClock{}, recvCfg)
	c := &recConn{}
	r := &RecvRoom{}
	ep, _, _ := m.Start(r, "p:1", 3, []int32{1}, 1, newEP)
	m.Connected(ep, c)
	c.take()
	got, err := m.PeerFailed(ep, 3, "aborted")
	assert.Same(t, r, got)
	assert.ErrorIs(t, err, ErrPeer)
	assert.True(t, m.End(r, err, false))
	assert.Empty(t, c.take(), "no FAIL back to prefill")
	got, _ = m.PeerFailed(ep, 3, "again")
	assert.Nil(t, got)

	r2 := &RecvRoom{}
	m.Start(r2, "p:1", 4, []int32{1}, 1, newEP)
	c.take()
	cerr := CancelError(4, "cancelled by decode")
	assert.True(t, errors.Is(cerr, gen.ErrTransfer))
	m.End(r2, cerr, true)
	assert.Equal(t, []string{"FAIL 4 " + cerr.Error()}, c.take())
}

func TestRoomsHandleControlMessages(t *testing.T) {
	m := newTestRecv(&fakeClock{}, recvCfg)
	c := &recConn{}
	r := &RecvRoom{}
	ep, _, _ := m.Start(r, "p:1", 1, []int32{1}, 4, newEP)
	m.Connected(ep, c)
	ev, err := m.Handle(ep, Header{Type: MsgRegisterAck, Room: 1}, nil)
	require.NoError(t, err)
	assert.Nil(t, ev.Room)
	ev, err = m.Handle(ep, Header{Type: MsgDone, Room: 1}, AppendDone(nil, Done{FirstToken: 5, Frames: 2, NumTokens: 4}))
	require.NoError(t, err)
	assert.Same(t, r, ev.Room)
	assert.ErrorIs(t, ev.Err, ErrProtocol, "DONE before the frames")
	assert.False(t, r.Live)
	_, err = m.Handle(ep, Header{Type: MsgFail}, []byte("bye"))
	assert.ErrorIs(t, err, ErrPeer, "FAIL for room 0 closes the connection")
	_, err = m.Handle(ep, Header{Type: MsgRegister, Room: 1}, nil)
	assert.ErrorIs(t, err, ErrProtocol, "decode never receives REGISTER")
	_, err = m.Handle(ep, Header{Type: MsgDone, Room: 1}, []byte{1})
	assert.ErrorIs(t, err, ErrProtocol, "malformed DONE")

	s, sc := NewSendRooms(4, 8, nil), &recConn{}
	sr, _ := s.Register(sc, 2, Register{NumTokens: 4, Pages: []int32{0}}, "d")
	s.Claim(2)
	sev, err := s.Handle(sc, Header{Type: MsgAck, Room: 2}, nil, "d")
	require.NoError(t, err)
	assert.Same(t, sr, sev.Room)
	assert.NoError(t, sev.Err)
	_, err = s.Handle(sc, Header{Type: MsgPages, Room: 2}, nil, "d")
	assert.ErrorIs(t, err, ErrProtocol, "prefill never receives PAGES")
	sev, err = s.Handle(sc, Header{Type: MsgFail, Room: 2}, []byte("checksum"), "d")
	require.NoError(t, err)
	assert.ErrorIs(t, sev.Err, ErrPeer)
}
