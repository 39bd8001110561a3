package testutil

import (
	"testing"

	"pdsoak/internal/freeport"
)

// FreePort returns a loopback TCP port free at the time of the call, for a test that must
// name a port before the process that listens on it starts.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts returns n distinct free loopback TCP ports, drawn below the kernel's
// ephemeral range (pdsoak/internal/freeport says why).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	out, err := freeport.Loopback(n)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	return out
}
