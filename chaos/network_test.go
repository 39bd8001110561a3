package chaos

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/chaos/netproxy"
)

// scriptServer is a loopback server that, per connection, writes greet (if any), reads
// one line, waits for release, writes "ok\n" and reads on until the peer closes: the
// test decides which direction carries bytes when. Cleanup lets go of a connection still
// waiting for release (a failed test).
func scriptServer(t *testing.T, greet string, release <-chan struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		cs   []net.Conn
		quit = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			cs = append(cs, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if greet != "" {
					if _, err := io.WriteString(c, greet); err != nil {
						return
					}
				}
				if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
					return
				}
				select {
				case <-release:
				case <-quit:
					return
				}
				if _, err := io.WriteString(c, "ok\n"); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		close(quit)
		ln.Close()
		mu.Lock()
		for _, c := range cs {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestToxicProofCountsOnlyItsStream: a toxic acts on the bytes of its own stream, so
// only those prove it. Bytes the other way and new connections must not, on a real proxy
// whose counters tell the directions apart.
func TestToxicProofCountsOnlyItsStream(t *testing.T) {
	const link = "router->decode-0"
	setup := func(t *testing.T, greet, stream string, release <-chan struct{}) (*fakeEnv, Fault, netproxy.Counters, net.Conn) {
		t.Helper()
		addr := scriptServer(t, greet, release)
		l := netproxy.New()
		t.Cleanup(func() { _ = l.Close() })
		k, err := l.Add(link, addr)
		require.NoError(t, err)
		e := newFakeEnv(t)
		e.links = l
		f, err := New(spec("network_latency", link, map[string]any{"latency": "1ms", "stream": stream}))
		require.NoError(t, err)
		require.NoError(t, f.Apply(context.Background(), e))
		before := k.Counters()
		c, err := net.DialTimeout("tcp", k.Addr(), waitBound)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(waitBound))
		return e, f, before, c
	}
	counters := func(t *testing.T, e *fakeEnv) netproxy.Counters {
		k, err := e.links.Link(link)
		require.NoError(t, err)
		return k.Counters()
	}
	proved := func(t *testing.T, e *fakeEnv, f Fault) string {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.NoError(c, f.Verify(context.Background(), e))
		}, waitBound, 5*time.Millisecond)
		return f.(Evidencer).Evidence()
	}
	readAll := func(t *testing.T, c net.Conn, want string) {
		t.Helper()
		buf := make([]byte, len(want))
		_, err := io.ReadFull(c, buf)
		require.NoError(t, err)
		require.Equal(t, want, string(buf))
	}

	t.Run("upstream toxic, downstream bytes", func(t *testing.T) {
		release := make(chan struct{})
		close(release)
		e, f, before, c := setup(t, "hello\n", netproxy.Upstream, release)
		readAll(t, c, "hello\n") // a new connection and downstream bytes, nothing upstream
		now := counters(t, e)
		require.Greater(t, now.DownBytes, before.DownBytes)
		require.Greater(t, now.Conns, before.Conns)
		require.Equal(t, before.UpBytes, now.UpBytes)
		err := f.Verify(context.Background(), e)
		require.Error(t, err, "an upstream toxic proved by downstream bytes and a new connection")
		require.Contains(t, err.Error(), "no upstream bytes")

		_, err = io.WriteString(c, "ping\n")
		require.NoError(t, err)
		ev := proved(t, e, f)
		require.Contains(t, ev, "+5B upstream")
		require.NotContains(t, ev, "downstream")
		readAll(t, c, "ok\n")
		c.Close()
		require.NoError(t, f.Revert(context.Background(), e))
	})

	t.Run("downstream toxic, upstream bytes", func(t *testing.T) {
		release := make(chan struct{})
		e, f, before, c := setup(t, "", netproxy.Downstream, release)
		_, err := io.WriteString(c, "ping\n")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return counters(t, e).UpBytes >= before.UpBytes+5 }, waitBound, 5*time.Millisecond)
		require.Equal(t, before.DownBytes, counters(t, e).DownBytes) // the server waits for release
		err = f.Verify(context.Background(), e)
		require.Error(t, err, "a downstream toxic proved by upstream bytes and a new connection")
		require.Contains(t, err.Error(), "no downstream bytes")

		close(release)
		readAll(t, c, "ok\n")
		ev := proved(t, e, f)
		require.Contains(t, ev, "+3B downstream")
		require.NotContains(t, ev, "upstream")
		c.Close()
		require.NoError(t, f.Revert(context.Background(), e))
	})
}

// countedLink is a hand-written Link whose counters the test moves. Its AddToxic counts
// traffic before the toxic is in place: bytes a live link carries while a fault is
// adding its toxics, which crossed without meeting them.
type countedLink struct {
	toxics []string
	c      netproxy.Counters
	// during is what AddToxic adds to the counters before it installs the toxic.
	during netproxy.Counters
}

var _ Link = (*countedLink)(nil)

func (k *countedLink) Name() string { return "router->decode-0" }
func (k *countedLink) Addr() string { return "fake://router->decode-0" }
func (k *countedLink) AddToxic(t netproxy.Toxic) error {
	k.c.UpBytes += k.during.UpBytes
	k.c.DownBytes += k.during.DownBytes
	k.c.Conns += k.during.Conns
	k.toxics = append(k.toxics, t.Name)
	return nil
}
func (k *countedLink) RemoveToxic(_ context.Context, name string) error {
	for i, n := range k.toxics {
		if n == name {
			k.toxics = append(k.toxics[:i], k.toxics[i+1:]...)
		}
	}
	return nil
}
func (k *countedLink) Toxics() []string            { return append([]string(nil), k.toxics...) }
func (k *countedLink) Down() error                 { return nil }
func (k *countedLink) Up() error                   { return nil }
func (k *countedLink) IsUp() bool                  { return true }
func (k *countedLink) Counters() netproxy.Counters { return k.c }

// TestToxicBaselineAfterAddToxic: bytes that crossed before the toxic was in place (here:
// while AddToxic ran) must not prove it; the baseline is read after the link's last
// AddToxic. A live proxy's window between the two is too short to hit on purpose, so the
// fake link opens it deterministically.
func TestToxicBaselineAfterAddToxic(t *testing.T) {
	for _, stream := range []string{netproxy.Upstream, netproxy.Downstream, "both"} {
		t.Run(stream, func(t *testing.T) {
			k := &countedLink{during: netproxy.Counters{UpBytes: 100, DownBytes: 100, Conns: 1}}
			env := &FuncEnv{LinkFunc: func(string) (Link, error) { return k, nil }}
			f, err := New(spec("network_latency", k.Name(), map[string]any{"stream": stream}))
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, f.Apply(ctx, env))
			err = f.Verify(ctx, env)
			require.Error(t, err, "bytes counted while the toxic was being added proved it")
			require.Contains(t, err.Error(), "since it was added")

			k.c.UpBytes += 7
			k.c.DownBytes += 9
			require.NoError(t, f.Verify(ctx, env))
			ev := f.(Evidencer).Evidence()
			if stream != netproxy.Downstream {
				require.Contains(t, ev, "+7B upstream")
			}
			if stream != netproxy.Upstream {
				require.Contains(t, ev, "+9B downstream")
			}
			require.NoError(t, f.Revert(ctx, env))
			require.Empty(t, k.toxics)
		})
	}
}

// TestToxicProofBothStreams: a fault on both streams adds two toxics; bytes one way prove
// only one of them, so the link counts once both directions carried bytes.
func TestToxicProofBothStreams(t *testing.T) {
	k := &countedLink{}
	env := &FuncEnv{LinkFunc: func(string) (Link, error) { return k, nil }}
	f, err := New(spec("bandwidth_limit", k.Name(), map[string]any{"stream": "both"}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.Apply(ctx, env))
	k.c.UpBytes, k.c.Conns = 50, 3
	err = f.Verify(ctx, env)
	require.Error(t, err, "upstream bytes proved the downstream toxic too")
	require.True(t, strings.Contains(err.Error(), "no upstream and downstream bytes"), err.Error())
	k.c.DownBytes = 40
	require.NoError(t, f.Verify(ctx, env))
	require.Contains(t, f.(Evidencer).Evidence(), "+50B upstream +40B downstream")
	require.NoError(t, f.Revert(ctx, env))
}
