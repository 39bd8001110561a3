package kvtransfer

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
)

// TestRecvRoomsPages: the receiver's PAGES rule the Receiver and the sim share: frames
// of a gone room are dropped, a bad frame fails the room before any payload lands, good
// frames land in the room's destination pages and are verified by CRC.
func TestRecvRoomsPages(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	m := newTestRecv(clock, recvCfg) // page size 4, 2 layers, 8 bytes a token
	store, err := kernels.NewKVStore(16, 4, 2, 8)
	require.NoError(t, err)
	r := &RecvRoom{}
	ep, _, err := m.Start(r, "p:1", 7, []int32{5, 9}, 6, newEP)
	require.NoError(t, err)
	m.Connected(ep, &recConn{})

	got, dst, bad := m.Pages(ep, 8, []Entry{{Len: 32}}, store, nil)
	assert.Nil(t, got, "room 8 is not there")
	assert.NoError(t, bad)
	assert.Empty(t, dst)

	payload := func(b byte, n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = b + byte(i)
		}
		return p
	}
	p0, p1 := payload(1, 32), payload(2, 16)
	es := []Entry{{Page: 0, Layer: 1, Len: 32, CRC: Checksum(p0)}, {Page: 1, Layer: 0, Len: 16, CRC: Checksum(p1)}}
	got, dst, bad = m.Pages(ep, 7, es, store, nil)
	require.NoError(t, bad)
	require.Same(t, r, got)
	require.Len(t, dst, 2)
	copy(dst[0], p0)
	copy(dst[1], p1)
	assert.Equal(t, p0, store.LayerBytes(5, 1)[:32], "frame 0 lands in destination page 5, layer 1")
	assert.Equal(t, p1, store.LayerBytes(9, 0)[:16])
	n, err := VerifyPages(7, es, dst, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 48, n)

	dst[1][0] ^= 0xff
	n, err = VerifyPages(7, es, dst, nil)
	assert.ErrorIs(t, err, ErrChecksum)
	assert.EqualValues(t, 32, n)
	var gone atomic.Bool
	gone.Store(true)
	n, err = VerifyPages(7, es, dst, &gone)
	assert.NoError(t, err, "a gone room's pages are not its own: nothing to verify")
	assert.Zero(t, n)

	_, dst, bad = m.Pages(ep, 7, es[:1], store, nil)
	assert.ErrorIs(t, bad, ErrProtocol, "a duplicate frame")
	assert.Empty(t, dst, "no payload lands for a bad batch")
}
