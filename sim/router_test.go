package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A restarted router is a fresh process: it refuses connections until its first round
// of health checks is over (Router.Start runs it before serving), then draws from its
// seed again, so its first bootstrap room is the one the first run drew first.
func TestRestartedRouterStartsFromItsSeed(t *testing.T) {
	loop, srv := build(t, pdStrict)
	first := func(id string) uint64 {
		s := submit(loop, srv, id, 20, 4)
		require.NoError(t, s.err)
		reqs := srv.router.requests()
		require.Len(t, reqs, 1)
		require.NotNil(t, reqs[0].Room)
		loop.RunUntil(loop.Now().Add(loop.Now().Sub(Epoch) + 2e9))
		require.NotNil(t, s.done)
		require.NoError(t, s.done.Err)
		return *reqs[0].Room
	}
	room := first("before")
	second := first("again") // the generator carries on within one run
	assert.NotEqual(t, room, second)

	srv.kill(ProcessRouter)
	srv.router.restart()
	s := submit(loop, srv, "starting", 20, 4)
	assert.ErrorIs(t, s.err, ErrConnRefused, "no listener before the first round is over")
	loop.RunUntil(loop.Now().Add(1e8))
	assert.False(t, srv.router.starting)
	assert.Equal(t, room, first("after"), "the restarted router draws from its seed")
}
