//go:build !unix

package client

import "net"

// alive cannot peek without blocking here; a stale connection fails its write and the
// request is retried on a fresh one (roundTrip).
func alive(net.Conn) bool { return true }

// waitReadable cannot wait without reading here; the reader keeps its buffer.
func waitReadable(net.Conn) error { return nil }
