package client

import "fmt"

// The words of two outcomes' errors, which the simulator's client (sim) writes too.

// LostMidStreamError is why a stream whose connection ended abruptly after its headers,
// before [DONE], is connection_lost.
func LostMidStreamError(err error) error {
	return fmt.Errorf("client: connection lost mid-stream, no [DONE]: %w", err)
}

// CancelledError is why a request cancelled by its context (cause: the context's cause)
// is cancelled.
func CancelledError(cause error) error { return fmt.Errorf("client: cancelled: %w", cause) }
