package testutil

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// portsFrom is the low end of the ports FreePorts draws from.
const portsFrom = 10000

// FreePort returns a loopback TCP port free at the time of the call, for a test that must
// name a port before the process that listens on it starts.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts returns n distinct free loopback TCP ports. They are drawn below the kernel's
// ephemeral range: a port taken from a listener on port 0 and closed again is soon handed
// to the next listener on port 0 (a parallel test's proxy, another process), which then
// holds it when the caller's process binds it ("address already in use").
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	hi := ephemeralLow()
	var out []int
	seen := map[int]bool{}
	for try := 0; len(out) < n && try < 10000; try++ {
		p := rand.IntN(hi-portsFrom) + portsFrom
		if hi <= portsFrom {
			p = 0 // no room below the ephemeral range: let the kernel pick
		}
		if seen[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		p = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) < n {
		t.Fatalf("testutil: found %d free ports of %d", len(out), n)
	}
	return out
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's default where
// it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 0 {
				return v
			}
		}
	}
	return 32768
}
