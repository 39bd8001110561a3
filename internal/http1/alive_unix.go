//go:build unix

package http1

import (
	"errors"
	"net"
	"syscall"
)

// Alive reports whether an idle pooled connection is still open: a non-blocking peek
// finds nothing to read (EAGAIN). EOF means the server closed it; data means it is out
// of step. One syscall per reuse, no goroutine watching idle connections.
func Alive(nc net.Conn) bool {
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

// WaitReadable returns once nc has something to read (data, its end or an error) without
// reading it, or with the error that ended the wait (a deadline set to abort it). The
// first look is a non-blocking peek: the poller forgets readiness it saw before the wait
// began, so only a syscall can tell whether data is already there. After a wake-up no
// second peek: the caller's Read finds the data (a rare spurious wake-up only means that
// Read waits as usual). So a token costs what a plain read does: one syscall that finds
// nothing, one that reads.
func WaitReadable(nc net.Conn) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	first := true
	var b [1]byte
	return rc.Read(func(fd uintptr) bool {
		if !first {
			return true
		}
		first = false
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
	})
}

// isReset reports whether err is the peer resetting or having closed the connection.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
