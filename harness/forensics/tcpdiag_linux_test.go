package forensics

import "testing"

// parseDiag reads netlink datagrams from the kernel; whatever the bytes, it neither
// panics nor loops.
func FuzzParseDiag(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Add([]byte{16, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // NLMSG_DONE
	f.Add(append([]byte{100, 0, 0, 0, 20, 0}, make([]byte, 94)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := map[uint64]tcpIdle{}
		_, _ = parseDiag(b, out)
	})
}
