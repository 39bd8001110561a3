//go:build !linux

package kvtransfer

import "net"

func readv(c net.Conn, dst [][]byte, g *pageGuard) error { return readEach(c, dst, g) }
