package phases

import (
	"context"
	"sync"
	"time"
)

// Clock is how a phase waits: the wall clock of a real run, or a simulated run's
// virtual one.
type Clock interface {
	Now() time.Time
	// Sleep lets d pass; false when the run is being cut short (the wait ended early).
	Sleep(d time.Duration) bool
	// Every calls fn every d from now until stop, which waits for a call in progress;
	// ctx ends when stop is called.
	Every(d time.Duration, fn func(ctx context.Context)) (stop func())
}

// Wall is the real runner's Clock: Sleep ends early when ctx ends, Every runs its
// calls in a goroutine on a ticker.
func Wall(ctx context.Context) Clock { return wall{ctx} }

type wall struct{ ctx context.Context }

func (wall) Now() time.Time { return time.Now() }

func (w wall) Sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (w wall) Every(d time.Duration, fn func(context.Context)) func() {
	ctx, cancel := context.WithCancel(w.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	})
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}
