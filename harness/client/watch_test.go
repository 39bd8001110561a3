package client

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatch: a caller context's end cancels every request in flight under it with its
// cause, once; a request that ended is not cancelled; one added after the end is
// cancelled at once; contexts clean their sets up when they end, and empty sets of
// contexts that never end stay bounded.
func TestWatch(t *testing.T) {
	var w watch
	var mu sync.Mutex
	causes := map[*reqState][]error{}
	var wg sync.WaitGroup
	newReq := func() *reqState {
		st := &reqState{}
		st.cancel = func(err error) {
			mu.Lock()
			causes[st] = append(causes[st], err)
			mu.Unlock()
			wg.Done()
		}
		return st
	}
	stop := errors.New("drain bound")
	ctx, cancel := context.WithCancelCause(context.Background())
	a, b, done := newReq(), newReq(), newReq()
	for _, st := range []*reqState{a, b, done} {
		w.add(ctx, st)
	}
	w.remove(ctx, done)
	wg.Add(2)
	cancel(stop)
	wg.Wait()
	mu.Lock()
	assert.Equal(t, []error{stop}, causes[a])
	assert.Equal(t, []error{stop}, causes[b])
	assert.Empty(t, causes[done], "a request that ended is not cancelled")
	mu.Unlock()
	w.remove(ctx, a) // after the end: nothing to undo
	late := newReq()
	wg.Add(1)
	w.add(ctx, late)
	wg.Wait()
	mu.Lock()
	assert.Equal(t, []error{stop}, causes[late], "added after the end: cancelled at once")
	mu.Unlock()
	w.remove(ctx, late)
	w.mu.Lock()
	require.Empty(t, w.sets, "an ended context leaves no set")
	w.mu.Unlock()

	// Contexts that never end: their empty sets are dropped past maxIdleSets.
	for range 3 * maxIdleSets {
		c, cancel := context.WithCancel(context.Background())
		defer cancel()
		st := newReq()
		w.add(c, st)
		w.remove(c, st)
	}
	w.mu.Lock()
	assert.LessOrEqual(t, len(w.sets), maxIdleSets+1)
	w.mu.Unlock()
}
