package kvtransfer

import (
	"errors"
	"io"
	"net"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// readv fills dst's slices in order from c with readv(2): one system call for many
// pages. It waits for data through the runtime's poller (without g, so c's read deadline
// holds and a room can end meanwhile); each non-blocking readv holds g.
func readv(c net.Conn, dst [][]byte, g *pageGuard) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return readEach(c, dst, g)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	// An empty iovec list reads nothing, which would look like EOF.
	dst = slices.DeleteFunc(dst, func(b []byte) bool { return len(b) == 0 })
	for len(dst) > 0 {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			g.lock(dst)
			n, rerr = unix.Readv(int(fd), dst[:min(len(dst), 1024)]) // IOV_MAX
			g.unlock()
			return !errors.Is(rerr, unix.EAGAIN)
		})
		switch {
		case err != nil:
			return err
		case errors.Is(rerr, unix.EINTR):
			continue
		case rerr != nil:
			return rerr
		case n == 0:
			return io.EOF
		}
		for n > 0 {
			k := min(n, len(dst[0]))
			dst[0], n = dst[0][k:], n-k
			if len(dst[0]) == 0 {
				dst = dst[1:]
			}
		}
	}
	return nil
}
