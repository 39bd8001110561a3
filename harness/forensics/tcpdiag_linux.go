package forensics

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// How long each TCP socket has been silent, from the kernel's tcp_info (its
// tcpi_last_data_sent and tcpi_last_data_recv, milliseconds ago) through a sock_diag
// netlink dump of the harness's network namespace: /proc/net/tcp does not say. x/sys has
// the constants but no inet_diag types, so the two structs are laid out here.

// tcpIdle is how long ago a socket last sent and received data.
type tcpIdle struct{ sentMs, recvMs uint32 }

const (
	inetDiagReqV2Len = 56 // inet_diag_req_v2 without the nlmsghdr: 8 + inet_diag_sockid (48)
	inetDiagMsgLen   = 72 // inet_diag_msg: 4 + sockid (48) + expires, rqueue, wqueue, uid, inode
	inetDiagInfo     = 2  // INET_DIAG_INFO: struct tcp_info
	tcpInfoLastSent  = 44 // offsetof(struct tcp_info, tcpi_last_data_sent)
	tcpInfoLastRecv  = 52 // offsetof(struct tcp_info, tcpi_last_data_recv)
)

// tcpIdleByInode dumps every TCP socket (IPv4 and IPv6) of this network namespace with its
// tcp_info; keyed by socket inode.
func tcpIdleByInode() (map[uint64]tcpIdle, error) {
	out := map[uint64]tcpIdle{}
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := dumpTCPIdle(fam, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

func dumpTCPIdle(family uint8, out map[uint64]tcpIdle) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return fmt.Errorf("forensics: sock_diag: %w", err)
	}
	defer unix.Close(fd)
	// A bound on a dump that never ends (a kernel bug): the receive times out.
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2})
	req := make([]byte, unix.SizeofNlMsghdr+inetDiagReqV2Len)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1) // seq
	b := req[unix.SizeofNlMsghdr:]
	b[0], b[1], b[2] = family, unix.IPPROTO_TCP, 1<<(inetDiagInfo-1)
	ne.PutUint32(b[4:], 0xffffffff) // every state
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("forensics: sock_diag: %w", err)
	}
	buf := make([]byte, 1<<16)
	for range 1 << 16 { // bounded: a dump is a few messages per socket batch
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("forensics: sock_diag: %w", err)
		}
		done, err := parseDiag(buf[:n], out)
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("forensics: sock_diag: the dump did not end")
}

// parseDiag reads one datagram of netlink messages; done at NLMSG_DONE.
func parseDiag(b []byte, out map[uint64]tcpIdle) (done bool, err error) {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(ne.Uint32(b[0:]))
		typ := ne.Uint16(b[4:])
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return false, fmt.Errorf("forensics: sock_diag: bad message length %d", l)
		}
		switch typ {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.NLMSG_ERROR:
			return false, fmt.Errorf("forensics: sock_diag: the kernel refused the dump")
		}
		msg := b[unix.SizeofNlMsghdr:l]
		if len(msg) >= inetDiagMsgLen {
			inode := uint64(ne.Uint32(msg[68:]))
			attrs := msg[inetDiagMsgLen:]
			for len(attrs) >= 4 {
				al, at := int(ne.Uint16(attrs[0:])), ne.Uint16(attrs[2:])
				if al < 4 || al > len(attrs) {
					break
				}
				if at == inetDiagInfo && al-4 >= tcpInfoLastRecv+4 {
					info := attrs[4:al]
					out[inode] = tcpIdle{sentMs: ne.Uint32(info[tcpInfoLastSent:]), recvMs: ne.Uint32(info[tcpInfoLastRecv:])}
				}
				attrs = attrs[min(len(attrs), (al+3)&^3):]
			}
		}
		b = b[min(len(b), (l+3)&^3):]
	}
	return false, nil
}
