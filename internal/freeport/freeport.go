package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// From is the low end of the ports Loopback draws from.
const From = 10000

// Loopback returns n distinct loopback TCP ports that were free when drawn: below the
// kernel's ephemeral range where there is room (see the package doc), else from it.
func Loopback(n int) ([]int, error) { return On("127.0.0.1", n) }

// On is Loopback for another local address (a process that listens on host).
func On(host string, n int) ([]int, error) {
	hi := EphemeralLow()
	var out []int
	seen := map[int]bool{}
	for try := 0; len(out) < n && try < 10000; try++ {
		p := rand.IntN(max(hi-From, 1)) + From
		if hi <= From {
			p = 0 // no room below the ephemeral range: let the kernel pick
		}
		if seen[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
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
		return out, fmt.Errorf("freeport: found %d free ports of %d on %s", len(out), n, host)
	}
	return out, nil
}

// EphemeralLow is the first port of the kernel's ephemeral range (Linux's default where
// it cannot be read).
func EphemeralLow() int {
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
