//go:build unix

package router

import (
	"errors"
	"syscall"
)

// alive reports whether a pooled connection may carry a request: the worker has neither
// closed it nor sent anything on it while it was idle. One non-blocking peek, instead of
// the reader goroutine per idle connection net/http keeps for this.
func (c *legConn) alive() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read yet (EAGAIN) is the only state of a healthy idle connection;
		// no error means the worker's FIN (0 bytes) or bytes nobody asked for.
		ok = errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK)
		return true
	})
	return err == nil && ok
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
