package kvtransfer

import (
	"net"
	"syscall"
)

// writeNow makes one non-blocking write(2) of msg to c: the bytes written, or false
// when c is no socket, the socket's buffer is full (EAGAIN) or the write failed (the
// queued write meets that error again and kills the link).
func writeNow(c net.Conn, msg []byte) (int, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), msg)
		return true // never wait for writability: that is the writer goroutine's job
	}); err != nil || werr != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
