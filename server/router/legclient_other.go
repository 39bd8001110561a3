//go:build !unix

package router

import (
	"errors"
	"syscall"
)

// alive cannot peek here; a connection the worker closed fails its next request.
func (c *legConn) alive() bool { return true }

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET)
}
