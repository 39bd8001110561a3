package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// secondSignal returns a context that ends when SIGINT or SIGTERM arrives again after
// ctx (the run's, cancelled by the first one) ended: the user insists, so the runner
// skips what it would still do on an interrupt (the interrupt's forensics bundle).
// stop releases it.
func secondSignal(ctx context.Context) (hurry context.Context, stop func()) {
	hurry, hurried := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		select {
		case <-ch:
			hurried()
		case <-done:
		}
	}()
	return hurry, func() { close(done); hurried() }
}
