package netproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer is a real loopback echo server.
type echoServer struct {
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	cs     []net.Conn
	closed bool // set by close: a connection accepted after it is closed at once
}

func newEcho(t testing.TB) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Accept may return a connection after close ran: close it too, or its
			// copy (and close's Wait) would last as long as the peer keeps it open.
			e.mu.Lock()
			if e.closed {
				e.mu.Unlock()
				c.Close()
				continue
			}
			e.cs = append(e.cs, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(e.close)
	return e
}

func (e *echoServer) close() {
	e.ln.Close()
	e.mu.Lock()
	e.closed = true
	for _, c := range e.cs {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

func (e *echoServer) addr() string { return e.ln.Addr().String() }

func newLinks(t *testing.T) *Links {
	t.Helper()
	l := New()
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes a line and reads it back, bounded by 30 s (a loaded machine keeps
// it; a toxic that should answer never gets near it).
func roundTrip(t *testing.T, c net.Conn, msg string) (string, time.Duration) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err, "read")
	return strings.TrimSuffix(line, "\n"), time.Since(start)
}

func TestPassThroughAndCounters(t *testing.T) {
	e := newEcho(t)
	l := newLinks(t)
	addr, err := l.Hook("router->decode-0", e.addr())
	require.NoError(t, err)
	require.NotEqual(t, e.addr(), addr, "the proxy has its own address")
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), "proxy addr %q", addr)
	c := dial(t, addr)
	got, _ := roundTrip(t, c, "hello")
	require.Equal(t, "hello", got, "echo")
	k, err := l.Link("router->decode-0")
	require.NoError(t, err)
	// The counter toxic counts a chunk before passing it on, so the echo's return
	// orders both counts before this read.
	require.Equal(t, Counters{UpBytes: 6, DownBytes: 6, Conns: 1}, k.Counters())
	_, err = l.Link("nope")
	require.ErrorIs(t, err, ErrUnknownLink)
	require.Equal(t, []string{"router->decode-0"}, l.Names())
	// Same upstream again: same address.
	again, _ := l.Hook("router->decode-0", e.addr())
	require.Equal(t, addr, again, "second Hook moved the proxy")
}

func TestLatencyObservable(t *testing.T) {
	e := newEcho(t)
	l := newLinks(t)
	k, err := l.Add("a->b", e.addr())
	require.NoError(t, err)
	require.NoError(t, k.AddToxic(Toxic{Type: ToxicLatency, Attributes: map[string]any{"latency": 300}}))
	require.Equal(t, []string{"latency_downstream"}, k.Toxics())
	c := dial(t, k.Addr())
	// A lower bound only: the toxic guarantees at least 300 ms, a loaded machine only adds.
	got, d := roundTrip(t, c, "slow")
	require.Equal(t, "slow", got)
	require.GreaterOrEqual(t, d, 250*time.Millisecond, "round trip through a 300 ms latency toxic")
	require.NoError(t, k.RemoveToxic(context.Background(), "latency_downstream"))
	require.Empty(t, k.Toxics(), "toxics left")
	got, _ = roundTrip(t, c, "fast")
	require.Equal(t, "fast", got, "after removal")
	require.Error(t, k.RemoveToxic(context.Background(), "latency_downstream"), "removing a missing toxic")
}

func TestDownClosesConnectionsAndUpRestores(t *testing.T) {
	e := newEcho(t)
	l := newLinks(t)
	k, err := l.Add("prefill-0->decode-0", e.addr())
	require.NoError(t, err)
	addr := k.Addr()
	c := dial(t, addr)
	roundTrip(t, c, "x")
	require.NoError(t, k.Down())
	if k.IsUp() {
		t.Fatal("IsUp after Down")
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("open connection survived Down")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("open connection not closed by Down (read timed out)")
	}
	if c2, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c2.Close()
		t.Fatal("dial succeeded while the link is down")
	}
	require.NoError(t, k.Up())
	if k.Addr() != addr {
		t.Fatalf("Up moved the address: %s → %s", addr, k.Addr())
	}
	if got, _ := roundTrip(t, dial(t, addr), "back"); got != "back" {
		t.Fatalf("after Up: %q", got)
	}
}

func TestToxics(t *testing.T) {
	tests := []struct {
		name  string
		toxic Toxic
		check func(t *testing.T, c net.Conn)
	}{
		{"timeout black-holes", Toxic{Type: ToxicTimeout, Attributes: map[string]any{"timeout": 0}}, func(t *testing.T, c net.Conn) {
			_, _ = io.WriteString(c, "lost\n")
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err := c.Read(make([]byte, 8))
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("read through a black hole = %v, want a timeout", err)
			}
		}},
		{"reset_peer resets", Toxic{Type: ToxicResetPeer, Stream: Upstream, Attributes: map[string]any{"timeout": 0}}, func(t *testing.T, c net.Conn) {
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			_, _ = io.WriteString(c, "x\n")
			if _, err := c.Read(make([]byte, 8)); err == nil {
				t.Fatal("read succeeded through reset_peer")
			}
		}},
		{"limit_data closes", Toxic{Type: ToxicLimitData, Attributes: map[string]any{"bytes": 4}}, func(t *testing.T, c net.Conn) {
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			_, _ = io.WriteString(c, "0123456789\n")
			got, err := io.ReadAll(c)
			if err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("read: %v", err)
			}
			if len(got) > 4 {
				t.Fatalf("read %q past a 4-byte limit", got)
			}
		}},
		{"slicer keeps bytes", Toxic{Type: ToxicSlicer, Attributes: map[string]any{"average_size": 2, "delay": 10}}, func(t *testing.T, c net.Conn) {
			if got, _ := roundTrip(t, c, "sliced-message"); got != "sliced-message" {
				t.Fatalf("slicer changed data: %q", got)
			}
		}},
		{"bandwidth passes data", Toxic{Type: ToxicBandwidth, Attributes: map[string]any{"rate": 1000}}, func(t *testing.T, c net.Conn) {
			if got, _ := roundTrip(t, c, "narrow"); got != "narrow" {
				t.Fatalf("bandwidth changed data: %q", got)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEcho(t)
			l := newLinks(t)
			k, err := l.Add("l", e.addr())
			require.NoError(t, err)
			require.NoError(t, k.AddToxic(tc.toxic))
			tc.check(t, dial(t, k.Addr()))
			// The proxy reads the client's bytes on its own goroutine: through a black
			// hole nothing orders that read before check returns.
			require.Eventually(t, func() bool { return k.Counters().UpBytes > 0 }, 30*time.Second, 5*time.Millisecond,
				"upstream counter did not move")
			require.NoError(t, k.ResetToxics(context.Background()))
			if len(k.Toxics()) != 0 {
				t.Errorf("toxics after reset: %v", k.Toxics())
			}
		})
	}
}

func TestAddToxicErrors(t *testing.T) {
	e := newEcho(t)
	l := newLinks(t)
	k, err := l.Add("l", e.addr())
	require.NoError(t, err)
	for name, tx := range map[string]Toxic{
		"unknown type": {Type: "explode"},
		"bad stream":   {Type: ToxicLatency, Stream: "sideways"},
		"reserved":     {Type: ToxicLatency, Name: "pdsoak_counter_x"},
		"bad attrs":    {Type: ToxicLatency, Attributes: map[string]any{"latency": "slow"}},
	} {
		if err := k.AddToxic(tx); err == nil {
			t.Errorf("%s: AddToxic succeeded", name)
		}
	}
	require.NoError(t, k.AddToxic(Toxic{Type: ToxicLatency}))
	if err := k.AddToxic(Toxic{Type: ToxicLatency}); err == nil {
		t.Error("duplicate toxic accepted")
	}
	if _, err := l.Add("bad name", e.addr()); err == nil {
		t.Error("link name with a space accepted")
	}
	if _, err := l.Add("x", "nohostport"); err == nil {
		t.Error("bad upstream accepted")
	}
}

func TestRetargetKeepsAddress(t *testing.T) {
	e1, e2 := newEcho(t), newEcho(t)
	l := newLinks(t)
	addr, err := l.Hook("router->prefill-0", e1.addr())
	require.NoError(t, err)
	addr2, err := l.Hook("router->prefill-0", e2.addr())
	require.NoError(t, err)
	if addr2 != addr {
		t.Fatalf("re-target moved the proxy: %s → %s", addr, addr2)
	}
	k, _ := l.Link("router->prefill-0")
	if k.Upstream() != e2.addr() {
		t.Fatalf("upstream = %s", k.Upstream())
	}
	if got, _ := roundTrip(t, dial(t, addr), "moved"); got != "moved" {
		t.Fatalf("through re-targeted proxy: %q", got)
	}
}

func TestHealAndClose(t *testing.T) {
	e := newEcho(t)
	l := New()
	k, err := l.Add("l", e.addr())
	require.NoError(t, err)
	_ = k.AddToxic(Toxic{Type: ToxicLatency, Attributes: map[string]any{"latency": 1}})
	_ = k.Down()
	require.NoError(t, l.Heal(context.Background()))
	if !k.IsUp() || len(k.Toxics()) != 0 {
		t.Fatalf("after Heal: up=%v toxics=%v", k.IsUp(), k.Toxics())
	}
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	if _, err := l.Add("m", e.addr()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close = %v", err)
	}
}

// firehose is a loopback server that writes to each connection until it is closed.
type firehose struct {
	ln net.Listener
	wg sync.WaitGroup
	mu sync.Mutex
	cs []net.Conn
}

func newFirehose(t *testing.T) *firehose {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &firehose{ln: ln}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.cs = append(f.cs, c)
			f.mu.Unlock()
			f.wg.Go(func() {
				buf := make([]byte, 32<<10)
				for {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(f.close)
	return f
}

func (f *firehose) close() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.cs {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// A toxic holding bytes for a connection that does not read makes toxiproxy's removal
// wait for good (the same wait deadlocks when the connection closes meanwhile,
// Shopify/toxiproxy#558): RemoveToxic returns by its ctx with an error that says so,
// and the removal completes in the background once the connection reads again.
func TestRemoveToxicStuckReturnsByCtx(t *testing.T) {
	f := newFirehose(t)
	l := newLinks(t)
	k, err := l.Add("router->decode-0", f.ln.Addr().String())
	require.NoError(t, err)
	lat := Toxic{Type: ToxicLatency, Attributes: map[string]any{"latency": 1}}
	require.NoError(t, k.AddToxic(lat))
	c := dial(t, k.Addr()) // never read until the end: the proxy's output backs up
	// Until the buffers between the firehose and the client are full, a removal can
	// still go through: then put the toxic back and try again. Once they are full the
	// latency toxic sits on a send nobody takes, and only ctx ends the call.
	var stuck error
	deadline := time.Now().Add(60 * time.Second)
	for stuck == nil && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := k.RemoveToxic(ctx, "latency_downstream")
		cancel()
		if err == nil {
			require.NoError(t, k.AddToxic(lat))
			continue
		}
		stuck = err
	}
	require.Error(t, stuck, "no removal ever got stuck behind a connection that does not read")
	require.ErrorIs(t, stuck, context.DeadlineExceeded)
	require.ErrorContains(t, stuck, "netproxy: link router->decode-0: remove toxic latency_downstream")
	// Reading again lets the toxic go: the removal that was left running completes.
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, c)
	}()
	require.Eventually(t, func() bool { return len(k.Toxics()) == 0 }, 30*time.Second, 10*time.Millisecond,
		"the background removal never completed")
	// The proxy sees EOF upstream, passes on what it holds and closes the client's side.
	// (Closing the client first would leave bytes in the chain with nobody to take them.)
	f.close()
	<-drained
}
