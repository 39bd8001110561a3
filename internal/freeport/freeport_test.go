package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopbackPortsAreDistinctBindableAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := Loopback(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
		if lo := EphemeralLow(); lo > From && (p < From || p >= lo) {
			t.Fatalf("port %d outside [%d, %d)", p, From, lo)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		ln.Close()
	}
}
