package testutil

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortsAreDistinctBindableAndBelowTheEphemeralRange(t *testing.T) {
	ports := FreePorts(t, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
		if lo := ephemeralLow(); lo > portsFrom && (p < portsFrom || p >= lo) {
			t.Fatalf("port %d outside [%d, %d)", p, portsFrom, lo)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		ln.Close()
	}
}
