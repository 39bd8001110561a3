package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
	"pdsoak/server/gen"
)

// TestRouterStampsTheRequestTimeoutWhenItRuns: the simulated router applies the API's
// --request-timeout rule (api.StampDeadline) when its handler runs: a request sent to a
// stopped router gets its deadline from the moment the router thaws, as the real
// handler's time.Now() after SIGCONT.
func TestRouterStampsTheRequestTimeoutWhenItRuns(t *testing.T) {
	loop, srv := build(t, pdStrict+"\n  router_args: [--request-timeout=1]")
	// Decode never steps: only the deadline can end the request.
	_, err := srv.Fault(scenarios.Fault{Name: "f", Type: "scheduler_stall", Target: "decode-0"})
	require.NoError(t, err)
	srv.pause(ProcessRouter, true)
	s := submit(loop, srv, "r", 40, 8)
	require.NoError(t, s.err)
	loop.RunUntil(Epoch.Add(2 * time.Second))
	require.Nil(t, s.done, "the stopped router answers nothing")
	srv.pause(ProcessRouter, false)
	loop.RunUntil(Epoch.Add(2900 * time.Millisecond))
	require.Nil(t, s.done, "1s from the thaw has not passed")
	loop.RunUntil(Epoch.Add(4 * time.Second))
	require.NotNil(t, s.done, "the request outlived its deadline")
	require.Error(t, s.done.Err)
	assert.ErrorIs(t, s.done.Err, gen.ErrTimeout, "%v", s.done.Err)
	// deadline = thaw + --request-timeout (the answer then crosses the client's link)
	assert.WithinDuration(t, Epoch.Add(3*time.Second), s.doneAt, 50*time.Millisecond)
	assert.False(t, s.doneAt.Before(Epoch.Add(3*time.Second)))
}
