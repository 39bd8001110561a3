package kvtransfer

import "fmt"

// DialError is decode failing to connect to prefill addr's bootstrap server (the
// simulated KV link says it in the same words).
func DialError(addr string, err error) error {
	return fmt.Errorf("%w: dial prefill %s: %w", ErrConnection, addr, err)
}
