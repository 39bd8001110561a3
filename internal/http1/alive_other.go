//go:build !unix

package http1

import "net"

// Alive cannot peek without blocking here; a stale connection fails its write and the
// request is retried on a fresh one (roundTrip).
func Alive(net.Conn) bool { return true }

// WaitReadable cannot wait without reading here; the reader keeps its buffer.
func WaitReadable(net.Conn) error { return nil }

// isReset reports whether err is the peer resetting the connection (not told apart here).
func isReset(error) bool { return false }
