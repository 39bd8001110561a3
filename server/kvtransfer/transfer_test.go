package kvtransfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/kernels"
	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testShape is small enough to keep tests fast and big enough for several frames a room.
const (
	tPages    = 64
	tPageSize = 4
	tLayers   = 3
	tBytes    = 64 // per token per layer
)

func newStore(t testing.TB, layers int) *kernels.KVStore {
	t.Helper()
	s, err := kernels.NewKVStore(tPages, tPageSize, layers, tBytes)
	require.NoError(t, err)
	return s
}

// fill writes seeded random bytes into pages.
func fill(s *kernels.KVStore, pages []int32, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, p := range pages {
		for l := 0; l < s.Layers; l++ {
			b := s.LayerBytes(p, l)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		}
	}
}

// sameKV reports whether numTokens tokens of KV are equal in src and dst.
func sameKV(t *testing.T, src, dst *kernels.KVStore, sp, dp []int32, numTokens int) {
	t.Helper()
	for j := 0; j*src.PageSize < numTokens; j++ {
		n := min(src.PageSize, numTokens-j*src.PageSize) * src.BytesPerToken
		for l := 0; l < src.Layers; l++ {
			require.Equal(t, src.LayerBytes(sp[j], l)[:n], dst.LayerBytes(dp[j], l)[:n], "page %d layer %d", j, l)
		}
	}
}

func seq(from, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(from + i)
	}
	return p
}

// testOpts sets every bound far above what a loaded machine (CI under stress-ng, -race)
// can stall a goroutine for, so a test that expects success never fails on a timeout.
// Tests that expect a timeout ask for a short one with shortTimeouts: a timeout firing
// is a lower bound, which load only delays.
func testOpts(extra ...Option) []Option {
	return append([]Option{
		WithDialTimeout(generous), WithHandshakeTimeout(generous), WithFrameTimeout(generous), WithProgressTimeout(generous),
		WithHeartbeat(20*time.Millisecond, generous), WithAckTimeout(generous),
		WithHook(nil), WithLogger(nil),
	}, extra...)
}

// generous bounds what must not time out; waitBound bounds a wait for what must happen.
const (
	generous  = 20 * time.Second
	waitBound = 30 * time.Second
)

// shortTimeouts makes the receiver's or the sender's own timeouts fire quickly.
func shortTimeouts(extra ...Option) []Option {
	return testOpts(append([]Option{WithHeartbeat(20*time.Millisecond, 300*time.Millisecond),
		WithHandshakeTimeout(300 * time.Millisecond), WithProgressTimeout(300 * time.Millisecond)}, extra...)...)
}

type pair struct {
	src, dst *kernels.KVStore
	s        *Sender
	r        *Receiver
}

func newPair(t *testing.T, sopts, ropts []Option) *pair {
	t.Helper()
	p := &pair{src: newStore(t, tLayers), dst: newStore(t, tLayers)}
	p.s = NewSender(p.src, append(testOpts(), sopts...)...)
	require.NoError(t, p.s.Listen("127.0.0.1:0"))
	p.r = NewReceiver(p.dst, append(testOpts(), ropts...)...)
	t.Cleanup(func() { p.r.Close(); p.s.Close() })
	return p
}

// wait returns the transfer's result or fails the test after a generous bound.
func wait(t *testing.T, tr *Transfer) Result {
	t.Helper()
	res, ok := result(tr)
	require.True(t, ok, "room %d: no result within %s", tr.Room(), waitBound)
	return res
}

// result is wait for goroutines other than the test's (which must not call FailNow): a
// missing result is an error in Result.
func result(tr *Transfer) (Result, bool) {
	select {
	case res := <-tr.Done():
		return res, true
	case <-time.After(waitBound):
		return Result{Err: fmt.Errorf("room %d: no result within %s", tr.Room(), waitBound)}, false
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		numTokens int
		src, dst  []int32
	}{
		{"one token", 1, []int32{5}, []int32{9}},
		{"full pages", 4 * tPageSize, seq(0, 4), seq(20, 4)},
		{"partial last page", 3*tPageSize + 1, seq(10, 4), []int32{63, 2, 40, 7}},
		{"extra pages ignored", 5, seq(30, 6), seq(0, 6)},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, nil, nil)
			fill(p.src, tc.src, uint64(i))
			room := uint64(1000 + i)
			tr, err := p.r.Start(context.Background(), p.s.Addr(), room, tc.dst, tc.numTokens)
			require.NoError(t, err)
			require.NoError(t, p.s.Send(context.Background(), room, tc.src, tc.numTokens, 42+i), "Send")
			res := wait(t, tr)
			require.NoError(t, res.Err)
			require.Equal(t, 42+i, res.FirstToken)
			sameKV(t, p.src, p.dst, tc.src, tc.dst, tc.numTokens)
		})
	}
}

func TestSendBeforeRegister(t *testing.T) {
	var registered atomic.Int32
	p := newPair(t, []Option{WithOnRegister(func(Registration) { registered.Add(1) })}, nil)
	fill(p.src, seq(0, 2), 1)
	errc := make(chan error, 1)
	go func() { errc <- p.s.Send(context.Background(), 7, seq(0, 2), 8, 3) }()
	tr, err := p.r.Start(context.Background(), p.s.Addr(), 7, seq(8, 2), 8)
	require.NoError(t, err)
	res := wait(t, tr)
	require.NoError(t, res.Err)
	require.Equal(t, 3, res.FirstToken)
	require.NoError(t, <-errc)
	require.EqualValues(t, 1, registered.Load(), "OnRegister calls")
	sameKV(t, p.src, p.dst, seq(0, 2), seq(8, 2), 8)
}

func TestManyRoomsShareOneConnection(t *testing.T) {
	const rooms = 16
	p := newPair(t, nil, nil)
	var wg sync.WaitGroup
	results := make([]Result, rooms)
	sendErrs := make([]error, rooms)
	for i := 0; i < rooms; i++ {
		src, dst := seq(i*4, 4), seq(63-i*4-3, 4)
		fill(p.src, src, uint64(i))
		n := 4*tPageSize - i%3
		tr, err := p.r.Start(context.Background(), p.s.Addr(), uint64(i+1), dst, n)
		require.NoError(t, err)
		wg.Add(2)
		go func() { defer wg.Done(); sendErrs[i] = p.s.Send(context.Background(), uint64(i+1), src, n, i) }()
		go func() { defer wg.Done(); results[i], _ = result(tr) }()
	}
	wg.Wait()
	for i := 0; i < rooms; i++ {
		require.NoError(t, sendErrs[i], "room %d: send", i+1)
		require.NoError(t, results[i].Err, "room %d: result", i+1)
		require.Equal(t, i, results[i].FirstToken, "room %d", i+1)
		sameKV(t, p.src, p.dst, seq(i*4, 4), seq(63-i*4-3, 4), 4*tPageSize-i%3)
	}
	p.s.mu.Lock()
	links := len(p.s.links)
	p.s.mu.Unlock()
	require.Equal(t, 1, links, "connections")
}

type corruptKey struct{}

func TestCorruptFrameFailsOnlyItsRoom(t *testing.T) {
	// The hook corrupts the second frame of the rooms whose Send context is marked.
	var frames sync.Map
	hook := func(ctx context.Context, name string) (string, error) {
		room, ok := ctx.Value(corruptKey{}).(uint64)
		if !ok || name != HookSendFrame {
			return "", nil
		}
		v, _ := frames.LoadOrStore(room, new(atomic.Int32))
		if v.(*atomic.Int32).Add(1) == 2 {
			return "corrupt", nil
		}
		return "", nil
	}
	p := newPair(t, []Option{WithHook(hook)}, nil)
	const rooms = 6
	var wg sync.WaitGroup
	res := make([]Result, rooms)
	errs := make([]error, rooms)
	for i := 0; i < rooms; i++ {
		room := uint64(100 + i)
		src, dst := seq(i*3, 3), seq(32+i*3, 3)
		fill(p.src, src, uint64(i))
		tr, err := p.r.Start(context.Background(), p.s.Addr(), room, dst, 3*tPageSize)
		require.NoError(t, err)
		ctx := context.Background()
		if i == 2 {
			ctx = context.WithValue(ctx, corruptKey{}, room)
		}
		wg.Add(2)
		go func() { defer wg.Done(); errs[i] = p.s.Send(ctx, room, src, 3*tPageSize, 1) }()
		go func() { defer wg.Done(); res[i], _ = result(tr) }()
	}
	wg.Wait()
	for i := 0; i < rooms; i++ {
		if i == 2 {
			require.ErrorIs(t, res[i].Err, ErrChecksum, "corrupted room")
			require.ErrorIs(t, res[i].Err, gen.ErrTransfer, "corrupted room")
			require.ErrorIs(t, errs[i], ErrPeer, "corrupted room: Send")
			continue
		}
		require.NoError(t, errs[i], "room %d: send", i)
		require.NoError(t, res[i].Err, "room %d: result", i)
		sameKV(t, p.src, p.dst, seq(i*3, 3), seq(32+i*3, 3), 3*tPageSize)
	}
	// The connection survived: a later room still goes through.
	tr, err := p.r.Start(context.Background(), p.s.Addr(), 999, seq(60, 1), 1)
	require.NoError(t, err)
	require.NoError(t, p.s.Send(context.Background(), 999, seq(0, 1), 1, 5))
	require.NoError(t, wait(t, tr).Err)
}

func TestFailpointRegistry(t *testing.T) {
	tests := []struct {
		name, point, terms string
		want               error
		// sendWant, when set, is Send's error: a room whose bootstrap was dropped is
		// never registered, so Send waits for its (here short) context.
		sendWant error
	}{
		{"corrupt", HookSendFrame, "1*return(corrupt)", ErrChecksum, nil},
		{"drop", HookSendFrame, "1*return(drop)", ErrConnection, nil},
		{"bootstrap refused", HookBootstrap, "1*return(fail)", ErrPeer, nil},
		{"bootstrap drop", HookBootstrap, "1*return(drop)", ErrConnection, context.DeadlineExceeded},
		{"delay only", HookSendFrame, "2*sleep(1)", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := failpoint.NewRegistry()
			require.NoError(t, reg.Enable(tc.point, tc.terms))
			p := newPair(t, []Option{WithHook(reg.Eval)}, nil)
			tr, err := p.r.Start(context.Background(), p.s.Addr(), 5, seq(0, 2), 8)
			require.NoError(t, err)
			bound := waitBound
			if tc.sendWant != nil {
				bound = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			sendErr := p.s.Send(ctx, 5, seq(2, 2), 8, 1)
			res := wait(t, tr)
			if tc.want == nil {
				require.NoError(t, sendErr, "send")
				require.NoError(t, res.Err, "result")
				return
			}
			require.ErrorIs(t, res.Err, tc.want)
			require.Error(t, sendErr, "Send succeeded on a failed room")
			if tc.sendWant != nil {
				require.ErrorIs(t, sendErr, tc.sendWant)
			}
		})
	}
}

// fakePrefill is a hand-written prefill that speaks just enough of the protocol to
// misbehave: it answers HELLO, then runs script on the connection.
func fakePrefill(t *testing.T, script func(c net.Conn, register Header)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, _, _, err := ReadMessage(c, nil); err != nil {
			return
		}
		shape := Shape{tPageSize, tLayers, tBytes}
		if _, err := c.Write(appendMessage(nil, MsgHelloAck, 0, AppendShape(nil, shape))); err != nil {
			return
		}
		h, _, _, err := ReadMessage(c, nil)
		if err != nil {
			return
		}
		script(c, h)
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func TestPeerFailures(t *testing.T) {
	frame := func(room uint64) []byte { return pagesMsg(room, 0, make([]byte, tPageSize*tBytes)) }
	tests := []struct {
		name   string
		script func(c net.Conn, reg Header)
		want   error
	}{
		// Only the ErrTimeout cases get short timeouts (shortTimeouts): with them, a
		// loaded machine could turn any other case into a timeout.
		{"killed mid transfer", func(c net.Conn, reg Header) {
			c.Write(appendMessage(nil, MsgRegisterAck, reg.Room, nil))
			c.Write(frame(reg.Room))
			c.(*net.TCPConn).SetLinger(0) // RST, as when the process dies
		}, ErrConnection},
		{"silent after register (heartbeat lost)", func(c net.Conn, reg Header) {
			c.Write(appendMessage(nil, MsgRegisterAck, reg.Room, nil))
			drain(c) // no heartbeats: the receiver must give up on its own
		}, ErrTimeout},
		{"no register ack", func(c net.Conn, reg Header) {
			go heartbeat(c)
			drain(c)
		}, ErrTimeout},
		{"stalls between frames", func(c net.Conn, reg Header) {
			go heartbeat(c)
			c.Write(frame(reg.Room))
			drain(c)
		}, ErrTimeout},
		{"fails the room", func(c net.Conn, reg Header) {
			c.Write(appendMessage(nil, MsgFail, reg.Room, []byte("out of memory")))
			drain(c)
		}, ErrPeer},
		{"garbage", func(c net.Conn, reg Header) {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n...................."))
			drain(c)
		}, ErrProtocol},
		{"done too early", func(c net.Conn, reg Header) {
			c.Write(frame(reg.Room))
			c.Write(appendMessage(nil, MsgDone, reg.Room, AppendDone(nil, Done{1, 8, 1})))
			drain(c)
		}, ErrProtocol},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakePrefill(t, tc.script)
			opts := testOpts()
			if errors.Is(tc.want, ErrTimeout) {
				opts = shortTimeouts()
			}
			r := NewReceiver(newStore(t, tLayers), opts...)
			defer r.Close()
			tr, err := r.Start(context.Background(), addr, 77, seq(0, 2), 8)
			require.NoError(t, err)
			res := wait(t, tr)
			require.ErrorIs(t, res.Err, tc.want)
			require.ErrorIs(t, res.Err, gen.ErrTransfer)
		})
	}
}

// pagesMsg encodes a PAGES message of room: the frames of payloads, frame first, first
// (frame i is page i/tLayers, layer i%tLayers).
func pagesMsg(room uint64, first int, payloads ...[]byte) []byte {
	var table, body []byte
	for i, p := range payloads {
		f := first + i
		table = AppendEntry(table, Entry{Page: uint32(f / tLayers), Layer: uint32(f % tLayers), Len: uint32(len(p)), CRC: Checksum(p)})
		body = append(body, p...)
	}
	return append(appendMessage(nil, MsgPages, room, table), body...)
}

func heartbeat(c net.Conn) {
	hb := appendMessage(nil, MsgHeartbeat, 0, nil)
	for i := 0; i < 200; i++ {
		if _, err := c.Write(hb); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func drain(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 4096)
	for {
		if _, err := c.Read(b); err != nil {
			return
		}
	}
}

func TestReceiverErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := ln.Addr().String()
	ln.Close()
	other := NewSender(newStore(t, tLayers+1), testOpts()...)
	require.NoError(t, other.Listen("127.0.0.1:0"))
	defer other.Close()
	tests := []struct {
		name string
		addr string
		want error
	}{
		{"nothing listening", deadAddr, ErrConnection},
		{"shape mismatch", other.Addr(), ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReceiver(newStore(t, tLayers), testOpts()...)
			defer r.Close()
			tr, err := r.Start(context.Background(), tc.addr, 1, seq(0, 1), 1)
			require.NoError(t, err)
			require.ErrorIs(t, wait(t, tr).Err, tc.want)
		})
	}
	t.Run("bad arguments", func(t *testing.T) {
		r := NewReceiver(newStore(t, tLayers), testOpts()...)
		defer r.Close()
		for _, c := range []struct {
			room  uint64
			pages []int32
			n     int
		}{{0, seq(0, 1), 1}, {1, seq(0, 1), 5}, {1, []int32{tPages}, 1}, {1, nil, 0}} {
			_, err := r.Start(context.Background(), deadAddr, c.room, c.pages, c.n)
			require.Error(t, err, "Start(%d, %v, %d)", c.room, c.pages, c.n)
		}
	})
}

func TestAbortsPropagate(t *testing.T) {
	t.Run("decode cancels a registered room", func(t *testing.T) {
		aborted := make(chan uint64, 1)
		registered := make(chan uint64, 1)
		p := newPair(t, []Option{
			WithOnAbort(func(room uint64, _ string) { aborted <- room }),
			WithOnRegister(func(r Registration) { registered <- r.Room }),
		}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		tr, err := p.r.Start(ctx, p.s.Addr(), 31, seq(0, 1), 2)
		require.NoError(t, err)
		<-registered
		cancel()
		res := wait(t, tr)
		require.ErrorIs(t, res.Err, context.Canceled)
		require.ErrorIs(t, res.Err, gen.ErrTransfer)
		select {
		case room := <-aborted:
			require.EqualValues(t, 31, room, "aborted room")
		case <-time.After(waitBound):
			t.Fatal("prefill never learned of the abort")
		}
		require.Error(t, p.s.Send(context.Background(), 31, seq(0, 1), 2, 0), "Send of an aborted room")
	})
	t.Run("prefill fails before decode registers", func(t *testing.T) {
		p := newPair(t, nil, nil)
		p.s.Fail(32, "client went away")
		tr, err := p.r.Start(context.Background(), p.s.Addr(), 32, seq(0, 1), 2)
		require.NoError(t, err)
		require.ErrorIs(t, wait(t, tr).Err, ErrPeer)
	})
	t.Run("decode dies after registering", func(t *testing.T) {
		aborted := make(chan string, 1)
		registered := make(chan uint64, 1)
		p := newPair(t, []Option{
			WithOnAbort(func(_ uint64, reason string) { aborted <- reason }),
			WithOnRegister(func(r Registration) { registered <- r.Room }),
		}, nil)
		if _, err := p.r.Start(context.Background(), p.s.Addr(), 33, seq(0, 1), 2); err != nil {
			t.Fatal(err)
		}
		<-registered
		p.r.Close()
		select {
		case <-aborted:
		case <-time.After(waitBound):
			t.Fatal("prefill never learned decode died")
		}
	})
}

func TestSendValidation(t *testing.T) {
	p := newPair(t, nil, nil)
	tr, err := p.r.Start(context.Background(), p.s.Addr(), 9, seq(0, 2), 8)
	require.NoError(t, err)
	require.ErrorIs(t, p.s.Send(context.Background(), 9, seq(0, 2), 7, 0), ErrShape, "Send with the wrong token count")
	require.ErrorIs(t, wait(t, tr).Err, ErrPeer, "decode")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.s.Send(ctx, 12345, seq(0, 1), 1, 0), context.DeadlineExceeded, "Send of a room never registered")
}

func ExampleSender() {
	src, _ := kernels.NewKVStore(8, 4, 2, 16)
	dst, _ := kernels.NewKVStore(8, 4, 2, 16)
	s := NewSender(src, WithHook(nil))
	defer s.Close()
	if err := s.Listen("127.0.0.1:0"); err != nil {
		panic(err)
	}
	r := NewReceiver(dst, WithHook(nil))
	defer r.Close()
	copy(src.LayerBytes(3, 1), "hello")
	tr, _ := r.Start(context.Background(), s.Addr(), 1, []int32{6}, 2)
	if err := s.Send(context.Background(), 1, []int32{3}, 2, 17); err != nil {
		panic(err)
	}
	res := <-tr.Done()
	fmt.Println(res.FirstToken, res.Err, string(dst.LayerBytes(6, 1)[:5]))
	// Output: 17 <nil> hello
}

// TestSenderNoticesSilentDecode: a decode that registers a room and then goes silent (no
// heartbeats, as when it is frozen) is dropped after the idle timeout and its room aborted.
func TestSenderNoticesSilentDecode(t *testing.T) {
	aborted := make(chan string, 1)
	s := NewSender(newStore(t, tLayers), testOpts(WithHeartbeat(20*time.Millisecond, 200*time.Millisecond),
		WithOnAbort(func(_ uint64, reason string) { aborted <- reason }))...)
	c := rawDecode(t, s, 12)
	go drain(c)
	select {
	case reason := <-aborted:
		require.Contains(t, reason, "heartbeats lost")
	case <-time.After(waitBound):
		t.Fatal("silent decode never noticed")
	}
}

// TestProgressTimeoutOff: with WithProgressTimeout(0), a room whose sender stalls mid-room
// while heartbeats flow stays in progress (SGLang's unbounded Transferring) until the
// caller's context ends it.
func TestProgressTimeoutOff(t *testing.T) {
	addr := fakePrefill(t, func(c net.Conn, reg Header) {
		c.Write(pagesMsg(reg.Room, 0, make([]byte, tPageSize*tBytes)))
		go heartbeat(c)
		drain(c)
	})
	// A short progress timeout first, then 0: were 0 ignored, the room would end well
	// within the window below. Heartbeat loss is not what this test is about: its bound
	// stays generous.
	r := NewReceiver(newStore(t, tLayers), testOpts(WithProgressTimeout(200*time.Millisecond), WithProgressTimeout(0))...)
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	tr, err := r.Start(ctx, addr, 78, seq(0, 2), 8)
	require.NoError(t, err)
	select {
	case res := <-tr.Done():
		t.Fatalf("stalled room ended on its own: %v", res.Err)
	case <-time.After(time.Second):
	}
	cancel()
	require.ErrorIs(t, wait(t, tr).Err, context.Canceled)
}

// TestPausedSendEndsWhenDecodeGivesUp: a stall fault (pause on every frame) holds Send;
// when decode cancels the room, Send returns at once instead of waiting for the fault.
func TestPausedSendEndsWhenDecodeGivesUp(t *testing.T) {
	reg := failpoint.NewRegistry()
	require.NoError(t, reg.Enable(HookSendFrame, "pause"))
	defer reg.Disable(HookSendFrame)
	registered := make(chan uint64, 1)
	p := newPair(t, []Option{WithHook(reg.Eval), WithOnRegister(func(r Registration) { registered <- r.Room })}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	tr, err := p.r.Start(ctx, p.s.Addr(), 44, seq(0, 2), 8)
	require.NoError(t, err)
	<-registered
	sendErr := make(chan error, 1)
	go func() { sendErr <- p.s.Send(context.Background(), 44, seq(2, 2), 8, 1) }()
	require.Eventually(t, func() bool { // Send is held by the failpoint
		st, _ := reg.Get(HookSendFrame)
		return st.Paused > 0
	}, waitBound, 5*time.Millisecond, "Send never reached the paused failpoint")
	cancel()
	wait(t, tr)
	select {
	case err := <-sendErr:
		require.ErrorIs(t, err, ErrPeer, "Send")
	case <-time.After(waitBound):
		t.Fatal("Send still held by the paused failpoint after decode gave up")
	}
}

// TestBatchLimits moves rooms whose frames overflow one writev batch (by count and by
// bytes) and whose pages are larger than the receiver's read buffer (read, not handed out
// in place), and checks every byte.
func TestBatchLimits(t *testing.T) {
	tests := []struct {
		name                         string
		pages, pageSize, layers, bpt int
	}{
		{"more frames than one batch", 64, 4, 8, 64},               // 512 frames of 256 B
		{"more bytes than one batch", 16, 16, 8, 1024},             // 128 frames of 16 KiB
		{"pages larger than the read buffer", 3, 16, 2, 160 << 10}, // 6 frames of 2.5 MiB
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := kernels.NewKVStore(tc.pages*2, tc.pageSize, tc.layers, tc.bpt)
			require.NoError(t, err)
			dst, err := kernels.NewKVStore(tc.pages*2, tc.pageSize, tc.layers, tc.bpt)
			require.NoError(t, err)
			s := NewSender(src, testOpts()...)
			require.NoError(t, s.Listen("127.0.0.1:0"))
			defer s.Close()
			r := NewReceiver(dst, testOpts()...)
			defer r.Close()
			sp, dp := seq(0, tc.pages), seq(tc.pages, tc.pages)
			fill(src, sp, uint64(i))
			n := tc.pages*tc.pageSize - 1 // a partial last page
			tr, err := r.Start(context.Background(), s.Addr(), 1, dp, n)
			require.NoError(t, err)
			require.NoError(t, s.Send(context.Background(), 1, sp, n, 7), "Send")
			res := wait(t, tr)
			require.NoError(t, res.Err)
			require.Equal(t, 7, res.FirstToken)
			sameKV(t, src, dst, sp, dp, n)
		})
	}
}

// TestFramesKeepARoomAlive: frames that each arrive well within the progress timeout keep
// the room alive although the whole room takes longer than the timeout (the timer is
// pushed back by progress, not re-armed per frame).
func TestFramesKeepARoomAlive(t *testing.T) {
	const frames, gap, progress = 4 * tLayers, 250 * time.Millisecond, 2 * time.Second
	addr := fakePrefill(t, func(c net.Conn, reg Header) {
		go heartbeat(c)
		c.Write(appendMessage(nil, MsgRegisterAck, reg.Room, nil))
		payload := make([]byte, tPageSize*tBytes)
		for i := 0; i < frames; i++ {
			time.Sleep(gap)
			if _, err := c.Write(pagesMsg(reg.Room, i, payload)); err != nil {
				return
			}
		}
		c.Write(appendMessage(nil, MsgDone, reg.Room, AppendDone(nil, Done{FirstToken: 9, NumTokens: 4 * tPageSize, Frames: frames})))
		drain(c)
	})
	r := NewReceiver(newStore(t, tLayers), testOpts(WithProgressTimeout(progress))...)
	defer r.Close()
	tr, err := r.Start(context.Background(), addr, 5, seq(0, 4), 4*tPageSize)
	require.NoError(t, err)
	res := wait(t, tr)
	require.NoError(t, res.Err, "%d frames %s apart under a progress timeout of %s", frames, gap, progress)
	require.Equal(t, 9, res.FirstToken)
}

// TestEndedSendLeavesNoFrames: frames are gathered, not copied, so a Send that ends
// early must take its pending frames with it (the caller may reuse the pages at once);
// the connection still carries the next room.
func TestEndedSendLeavesNoFrames(t *testing.T) {
	reached := make(chan struct{})
	var n atomic.Int32
	hook := func(ctx context.Context, name string) (string, error) {
		if name == HookSendFrame && n.Add(1) == 3 { // two frames pending, the third held
			close(reached)
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "", nil
	}
	// No heartbeat within the test: it would flush the pending frames.
	p := newPair(t, []Option{WithHook(hook), WithHeartbeat(time.Hour, generous)}, nil)
	tr, err := p.r.Start(context.Background(), p.s.Addr(), 61, seq(0, 4), 4*tPageSize)
	require.NoError(t, err)
	// Send only once decode has the REGISTER_ACK: the sender's write loop writes that
	// ack concurrently with Send's first frames and would flush them, leaving nothing
	// pending to test.
	require.Eventually(t, func() bool {
		p.r.mu.Lock()
		defer p.r.mu.Unlock()
		return tr.rr.acked
	}, waitBound, time.Millisecond, "REGISTER_ACK")
	sendErr := make(chan error, 1)
	go func() { sendErr <- p.s.Send(context.Background(), 61, seq(4, 4), 4*tPageSize, 1) }()
	<-reached
	link := func() *link {
		p.s.mu.Lock()
		defer p.s.mu.Unlock()
		for l := range p.s.links {
			return l
		}
		return nil
	}()
	pending := func() int {
		link.wmu.Lock()
		defer link.wmu.Unlock()
		n := 0
		for _, b := range link.batches {
			n += len(b.payloads)
		}
		require.Equal(t, n, link.pendFrame, "frames counted")
		return n
	}
	require.Equal(t, 2, pending(), "frames pending")
	tr.Cancel("test")
	require.ErrorIs(t, wait(t, tr).Err, gen.ErrTransfer)
	select {
	case err := <-sendErr:
		require.ErrorIs(t, err, ErrPeer, "Send")
	case <-time.After(waitBound):
		t.Fatal("Send still running after decode cancelled the room")
	}
	require.Zero(t, pending(), "frames of the ended room still pending")

	fill(p.src, seq(8, 2), 3)
	tr, err = p.r.Start(context.Background(), p.s.Addr(), 62, seq(20, 2), 8)
	require.NoError(t, err)
	require.NoError(t, p.s.Send(context.Background(), 62, seq(8, 2), 8, 4))
	require.NoError(t, wait(t, tr).Err)
	sameKV(t, p.src, p.dst, seq(8, 2), seq(20, 2), 8)
}

// TestCancelMidPayload: payloads are read straight into the destination pages, so a room
// cancelled while its payload is half read must see no byte of it land in its pages
// once Cancel returned (the engine reuses them at once); the connection goes on.
func TestCancelMidPayload(t *testing.T) {
	const n = tPageSize * tBytes
	sent, proceed := make(chan struct{}), make(chan struct{})
	addr := fakePrefill(t, func(c net.Conn, reg Header) {
		c.Write(appendMessage(nil, MsgRegisterAck, reg.Room, nil))
		msg := pagesMsg(reg.Room, 0, bytes.Repeat([]byte{0xcd}, n))
		c.Write(msg[:len(msg)-n/2]) // the table and half the payload
		close(sent)
		<-proceed
		c.Write(msg[len(msg)-n/2:])
		for { // the next room's REGISTER (FAIL and heartbeats come first)
			h, _, _, err := ReadMessage(c, nil)
			if err != nil {
				return
			}
			if h.Type == MsgRegister {
				reg = h
				break
			}
		}
		payload := bytes.Repeat([]byte{0x5a}, n)
		c.Write(pagesMsg(reg.Room, 0, payload, payload, payload))
		c.Write(appendMessage(nil, MsgDone, reg.Room, AppendDone(nil, Done{FirstToken: 2, NumTokens: tPageSize, Frames: tLayers})))
		drain(c)
	})
	dst := newStore(t, tLayers)
	r := NewReceiver(dst, testOpts()...)
	defer r.Close()
	tr, err := r.Start(context.Background(), addr, 81, []int32{0}, tPageSize)
	require.NoError(t, err)
	<-sent
	require.Eventually(t, func() bool { // the reader is on the room's payload
		r.mu.Lock()
		defer r.mu.Unlock()
		return tr.reading
	}, waitBound, 5*time.Millisecond)
	tr.Cancel("test")
	clear(dst.LayerBytes(0, 0)) // the engine reuses the page
	require.ErrorIs(t, wait(t, tr).Err, gen.ErrTransfer)

	next, err := r.Start(context.Background(), addr, 82, []int32{1}, tPageSize)
	require.NoError(t, err)
	close(proceed)
	res := wait(t, next)
	require.NoError(t, res.Err, "the next room on the connection")
	require.Equal(t, bytes.Repeat([]byte{0x5a}, n), dst.LayerBytes(1, 2), "next room's page")
	require.Equal(t, make([]byte, n), dst.LayerBytes(0, 0), "the cancelled room's page was written after Cancel")
}

// rawDecode listens on s and dials it as a decode written by hand: HELLO with the test
// shape, then REGISTER of room for 3 tokens in page 1. The caller reads (or drains) the
// connection; s and the connection are closed at the test's end.
func rawDecode(t *testing.T, s *Sender, room uint64) net.Conn {
	t.Helper()
	require.NoError(t, s.Listen("127.0.0.1:0"))
	t.Cleanup(func() { s.Close() })
	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	c.Write(appendMessage(nil, MsgHello, 0, AppendShape(nil, Shape{tPageSize, tLayers, tBytes})))
	c.Write(appendMessage(nil, MsgRegister, room, AppendRegister(nil, Register{NumTokens: 3, Pages: []int32{1}})))
	return c
}
