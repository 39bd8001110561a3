package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// A decode worker serves a decode_only request itself: it waits, then runs as a
// colocated request would (its prompt is computed here: a prefill step), and finishes
// with its tokens. decode_only anywhere else, or with a room, is refused; a decode leg
// without a room and without decode_only is still refused.
func TestDecodeOnly(t *testing.T) {
	now := time.Unix(1000, 0)
	newSched := func(role Role) *Scheduler {
		c := testConfig()
		c.Role = role
		s, err := New(c)
		require.NoError(t, err)
		return s
	}
	req := func(id string, decodeOnly bool, room *gen.Bootstrap) *gen.Request {
		return &gen.Request{ID: id, Prompt: []int{2, 3, 4, 5, 6}, MaxTokens: 2, DecodeOnly: decodeOnly, Bootstrap: room}
	}

	s := newSched(RoleDecode)
	_, err := s.Arrive(now, req("leg-without-room", false, nil))
	require.ErrorIs(t, err, gen.ErrInvalid)
	assert.Contains(t, err.Error(), "needs a bootstrap room")
	_, err = s.Arrive(now, req("both", true, &gen.Bootstrap{Room: 7, Addr: "x:1"}))
	require.ErrorIs(t, err, gen.ErrInvalid)
	_, err = newSched(RolePrefill).Arrive(now, req("on-prefill", true, nil))
	require.ErrorIs(t, err, gen.ErrInvalid)

	seq, err := s.Arrive(now, req("alone", true, nil))
	require.NoError(t, err)
	rd := s.Ready(now)
	require.Len(t, rd.BatchSeqs, 1)
	assert.Equal(t, seq, rd.BatchSeqs[0])
	assert.Equal(t, 5, rd.PrefillTokens, "decode computes the whole prompt: a prefill step")
	assert.Empty(t, rd.Transfers, "no KV is fetched from a prefill worker")
	infos := s.Requests(now)
	require.Len(t, infos, 1)
	assert.Nil(t, infos[0].Room)
}
