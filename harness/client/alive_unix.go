//go:build unix

package client

import (
	"net"
	"syscall"
)

// alive reports whether an idle pooled connection is still open: a non-blocking peek
// finds nothing to read (EAGAIN). EOF means the server closed it; data means it is out
// of step. One syscall per reuse, no goroutine watching idle connections.
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && ok
}

// waitReadable returns once nc has something to read (data, its end or an error) without
// reading it, or with the error that ended the wait (a deadline set to abort it).
// drained says the last read left nothing in the socket (it returned less than it
// could take): any later byte then raises a fresh readiness edge, so the wait needs no
// syscall before it parks; and after the wake it needs none either, the caller's Read
// finds the data (a rare spurious wake only means that Read waits as usual).
func waitReadable(nc net.Conn, drained bool) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	if drained {
		first := true
		return rc.Read(func(uintptr) bool {
			ok := !first
			first = false
			return ok
		})
	}
	var b [1]byte
	return rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
	})
}
