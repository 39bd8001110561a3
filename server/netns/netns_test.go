package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func requireNetns(t *testing.T) {
	t.Helper()
	if err := Supported(); err != nil {
		t.Skipf("network namespaces unavailable here (%v): needs root and a kernel that allows `ip netns add`", err)
	}
}

func testPrefix(t *testing.T) string {
	b := make([]byte, 3)
	_, err := rand.Read(b)
	require.NoError(t, err)
	p := "pdn" + hex.EncodeToString(b)
	t.Cleanup(func() { _ = Cleanup(context.Background(), p) })
	return p
}

// inNamespace runs fn on a thread that has joined the namespace; sockets made there
// stay in it.
func inNamespace(t *testing.T, ns string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	require.NoError(t, err)
	defer orig.Close()
	target, err := os.Open(filepath.Join("/var/run/netns", ns))
	require.NoError(t, err)
	defer target.Close()
	require.NoError(t, unix.Setns(int(target.Fd()), unix.CLONE_NEWNET))
	fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatalf("back to the original namespace: %v", err) // the thread stays locked and dies
	}
	runtime.UnlockOSThread()
}

// echo serves one echo listener until the test ends.
func echo(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
}

func roundTrip(addr string, n int) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := make([]byte, n)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_, err = io.ReadFull(c, msg)
	return err
}

// Members are reachable from here and from each other over their veths, a member whose
// link is down is not, and Close leaves nothing behind.
func TestNetReachDownUpClose(t *testing.T) {
	requireNetns(t)
	ctx := context.Background()
	prefix := testPrefix(t)
	n, err := Create(ctx, prefix, []string{"a", "b"})
	require.NoError(t, err)
	a, err := n.Member("a")
	require.NoError(t, err)
	b, err := n.Member("b")
	require.NoError(t, err)
	assert.NotEqual(t, a.Addr, b.Addr)
	assert.True(t, n.Subnet.Contains(net.ParseIP(a.Addr)) && n.Subnet.Contains(net.ParseIP(n.Gateway)))

	var ln net.Listener
	inNamespace(t, a.Namespace, func() { ln, err = net.Listen("tcp", net.JoinHostPort(a.Addr, "0")) })
	require.NoError(t, err)
	echo(t, ln)
	addr := ln.Addr().String()
	// Nothing listens on that address here: the socket is in a's namespace.
	_, err = net.Listen("tcp", addr)
	require.Error(t, err, "a's address must not exist in the test's namespace")

	before, err := n.Counters("a")
	require.NoError(t, err)
	require.NoError(t, roundTrip(addr, 64<<10), "from here to a")
	after, err := n.Counters("a")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after.Tx-before.Tx, uint64(64<<10), "a received the bytes over its veth")
	assert.GreaterOrEqual(t, after.Rx-before.Rx, uint64(64<<10), "a sent the echo over its veth")

	var fromB error
	inNamespace(t, b.Namespace, func() { fromB = roundTrip(addr, 1024) })
	require.NoError(t, fromB, "from b's namespace to a")

	require.NoError(t, n.Down(ctx, "a"))
	require.Error(t, roundTrip(addr, 16), "a is partitioned")
	require.NoError(t, n.Up(ctx, "a"))
	require.Eventually(t, func() bool { return roundTrip(addr, 16) == nil }, 20*time.Second, 100*time.Millisecond, "a reachable again")

	require.NoError(t, n.Bandwidth(ctx, "a", 1<<20))
	require.NoError(t, roundTrip(addr, 1024), "through tbf")
	require.NoError(t, n.Bandwidth(ctx, "a", 0))
	if HasNetem(ctx) {
		require.NoError(t, n.Netem(ctx, "a", "delay", "5ms"))
		require.NoError(t, n.Netem(ctx, "a"))
	} else {
		require.Error(t, n.Netem(ctx, "a", "delay", "5ms"), "without netem in the kernel, Netem fails")
	}

	require.NoError(t, n.Close())
	require.NoError(t, n.Close(), "twice")
	left, err := Namespaces(ctx, prefix)
	require.NoError(t, err)
	assert.Empty(t, left)
	for _, l := range []string{a.HostIf, b.HostIf, n.Bridge} {
		assert.False(t, linkExists(l), "link %s left", l)
	}
}

// A crashed run's namespaces and links (same prefix) are removed by the next Create.
func TestCreateRemovesLeftovers(t *testing.T) {
	requireNetns(t)
	ctx := context.Background()
	prefix := testPrefix(t)
	_, err := Create(ctx, prefix, []string{"x", "y", "z"}) // never closed: a crash
	require.NoError(t, err)
	n, err := Create(ctx, prefix, []string{"x"})
	require.NoError(t, err)
	left, err := Namespaces(ctx, prefix)
	require.NoError(t, err)
	assert.Equal(t, []string{prefix + "-x"}, left)
	assert.False(t, linkExists(prefix+"h1"), "the crashed run's second veth")
	require.NoError(t, n.Close())
}

func TestValidPrefix(t *testing.T) {
	tests := []struct {
		name, prefix string
		ok           bool
	}{
		{"short", "pd", true},
		{"with digits and dash", "pd-1a", true},
		{"empty", "", false},
		{"too long for interface names", "abcdefghijk", false},
		{"leading digit", "1pd", false},
		{"slash", "pd/x", false},
		{"space", "pd x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidPrefix(tc.prefix)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestRouteNetsAndFreeSubnet(t *testing.T) {
	out := `default via 192.0.2.1 dev eth0
10.201.0.0/24 dev pdbr proto kernel scope link src 10.201.0.1
local 10.201.1.7 dev lo table local proto kernel scope host src 10.201.1.7
broadcast 10.201.0.255 dev pdbr table local proto kernel scope link src 10.201.0.1
10.201.2.0/23 via 192.0.2.9 dev eth0
`
	nets := routeNets(out)
	var got []string
	for _, n := range nets {
		got = append(got, n.String())
	}
	assert.Equal(t, []string{"10.201.0.0/24", "10.201.1.7/32", "10.201.0.255/32", "10.201.2.0/23"}, got)
	assert.Equal(t, "10.201.4.0/24", pickSubnet(nets).String(), "0 and 1 taken, 2 and 3 in the /23")
}

func TestLinkNamesAndOwnLink(t *testing.T) {
	out := "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\n7: pdth0@if6: <BROADCAST> mtu 1500\n8: pdtbr: <BROADCAST> mtu 1500\n"
	assert.Equal(t, []string{"lo", "pdth0", "pdtbr"}, linkNames(out))
	tests := []struct {
		name string
		own  bool
	}{{"pdth0", true}, {"pdtn12", true}, {"pdtbr", false}, {"pdthx", false}, {"pdt", false}, {"eth0", false}, {"pdth", false}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.own, ownLink("pdt", tc.name)) })
	}
}

func FuzzRouteNets(f *testing.F) {
	f.Add("default via 192.0.2.1 dev eth0\n10.0.0.0/8 dev x\nlocal 1.2.3.4 dev lo")
	f.Add("blackhole\n\n  \nunicast 300.1.1.1/99")
	f.Fuzz(func(t *testing.T, s string) {
		for _, n := range routeNets(s) {
			require.NotNil(t, n.IP)
		}
		_ = linkNames(s)
	})
}
