//go:build !linux

package forensics

import "errors"

type tcpIdle struct{ sentMs, recvMs uint32 }

func tcpIdleByInode() (map[uint64]tcpIdle, error) {
	return nil, errors.New("forensics: sock_diag is Linux only")
}
