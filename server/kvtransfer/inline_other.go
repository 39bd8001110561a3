//go:build !linux

package kvtransfer

import "net"

// writeNow: elsewhere every control message goes through the writer goroutine.
func writeNow(net.Conn, []byte) (int, bool) { return 0, false }
