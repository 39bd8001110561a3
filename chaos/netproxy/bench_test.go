package netproxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pump sends n bytes through addr to the echo server and reads them back.
func pump(b *testing.B, addr string, n int) time.Duration {
	b.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(b, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 32<<10)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, c, int64(n))
		done <- err
	}()
	for sent := 0; sent < n; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, <-done)
	return time.Since(start)
}

// BenchmarkProxyOverhead moves 8 MiB per op through an echo server directly and through
// a proxied link (counters on, no toxics), and reports the time ratio proxied/direct
// measured in the same run.
func BenchmarkProxyOverhead(b *testing.B) {
	e := newEcho(b)
	l := New()
	defer l.Close()
	k, err := l.Add("bench", e.addr())
	require.NoError(b, err)
	const n = 8 << 20
	var direct, proxied time.Duration
	b.SetBytes(2 * n)
	for b.Loop() {
		direct += pump(b, e.addr(), n)
		proxied += pump(b, k.Addr(), n)
	}
	b.ReportMetric(float64(proxied)/float64(direct), "proxied/direct")
	b.ReportMetric(float64(n)*float64(b.N)/proxied.Seconds()/1e6, "proxied-MB/s")
}
