package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestProcLife: the one process model the worker and the router embed: events run at
// once, wait while stopped or busy and run in order on SIGCONT, never reach a later
// life, and die with the process.
func TestProcLife(t *testing.T) {
	var p proc
	var got []int
	ev := func(n int) func() { return func() { got = append(got, n) } }
	busy := false
	p.busy = func() bool { return busy }
	p.post(p.inc, ev(0)) // not started: dropped
	p.start()
	first := p.inc
	p.post(first, ev(1))
	assert.True(t, p.stop())
	assert.False(t, p.stop(), "already stopped")
	p.post(first, ev(2))
	p.post(first, ev(3))
	assert.Equal(t, []int{1}, got)
	assert.True(t, p.cont())
	busy = true // what is left waits on, in order
	p.flush()
	assert.Equal(t, []int{1}, got)
	busy = false
	p.flush()
	assert.Equal(t, []int{1, 2, 3}, got)
	p.stop()
	p.post(first, ev(4))
	p.die()
	assert.False(t, p.cont(), "a dead process does not thaw")
	p.start()
	p.post(first, ev(5)) // the earlier life's event
	p.post(p.inc, ev(6))
	assert.Equal(t, []int{1, 2, 3, 6}, got, "4 died with its process, 5 is stale")
}
