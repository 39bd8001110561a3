package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
	"pdsoak/server/gen"
	"pdsoak/server/kvtransfer"
)

// tcpTransfer is a minimal engine.Transfer over server/kvtransfer for these tests (the
// production adapter, with metrics, lives in server/cli).
type tcpTransfer struct {
	sink     TransferSink
	sender   *kvtransfer.Sender
	receiver *kvtransfer.Receiver

	mu    sync.Mutex
	xfers map[uint64]*kvtransfer.Transfer
	sends map[uint64]context.CancelFunc
	done  map[uint64]chan struct{}
	wg    sync.WaitGroup
}

func (t *tcpTransfer) Bind(s TransferSink) { t.sink = s }

func (t *tcpTransfer) StartReceive(room uint64, addr string, pages []int32, numTokens int) {
	x, err := t.receiver.Start(context.Background(), addr, room, pages, numTokens)
	if err != nil {
		t.sink.Received(room, -1, fmt.Errorf("%w: %w", gen.ErrTransfer, err))
		return
	}
	t.mu.Lock()
	t.xfers[room] = x
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		res := <-x.Done()
		t.mu.Lock()
		delete(t.xfers, room)
		t.mu.Unlock()
		t.sink.Received(room, res.FirstToken, res.Err)
	}()
}

func (t *tcpTransfer) StartSend(room uint64, pages []int32, n, firstToken int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.mu.Lock()
	t.sends[room], t.done[room] = cancel, done
	t.mu.Unlock()
	src := slices.Clone(pages)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(done)
		err := t.sender.Send(ctx, room, src, n, firstToken)
		cancel()
		t.mu.Lock()
		delete(t.sends, room)
		t.mu.Unlock()
		t.sink.Sent(room, err)
	}()
}

func (t *tcpTransfer) Cancel(room uint64) {
	t.mu.Lock()
	x, cancel, done := t.xfers[room], t.sends[room], t.done[room]
	t.mu.Unlock()
	if x != nil {
		x.Cancel("cancelled by decode") // synchronous: no frame lands in the pages after it
	}
	if t.sender != nil {
		t.sender.Fail(room, "cancelled by prefill")
	}
	if cancel != nil {
		cancel()
		<-done // the sender stopped reading the pages
	}
}

func (t *tcpTransfer) close() {
	if t.sender != nil {
		_ = t.sender.Close()
	}
	if t.receiver != nil {
		_ = t.receiver.Close()
	}
	t.wg.Wait()
}

// TestPDOverTCP runs prefill and decode engines over the real KV transfer on loopback:
// outputs equal colocated ones, a corrupted frame fails only its request with
// gen.ErrTransfer, and both workers drain to zero.
func TestPDOverTCP(t *testing.T) {
	var corrupt atomic.Int64
	hook := func(ctx context.Context, name string) (string, error) {
		if name == kvtransfer.HookSendFrame && corrupt.Add(-1) == 0 {
			return "corrupt", nil
		}
		return "", nil
	}
	pb, db := tinyref(t, 256), tinyref(t, 256)
	pt := &tcpTransfer{xfers: map[uint64]*kvtransfer.Transfer{},
		sends: map[uint64]context.CancelFunc{}, done: map[uint64]chan struct{}{}}
	pt.sender = kvtransfer.NewSender(pb.KV(), kvtransfer.WithLogger(quiet), kvtransfer.WithHook(hook),
		kvtransfer.WithOnRegister(func(r kvtransfer.Registration) { pt.sink.Registered(r.Room, len(r.DestPages)) }))
	require.NoError(t, pt.sender.Listen("127.0.0.1:0"))
	dt := &tcpTransfer{xfers: map[uint64]*kvtransfer.Transfer{},
		sends: map[uint64]context.CancelFunc{}, done: map[uint64]chan struct{}{},
		receiver: kvtransfer.NewReceiver(db.KV(), kvtransfer.WithLogger(quiet))}
	// Engines shut down (t.Cleanup, last in first out) before the transfers close.
	t.Cleanup(func() { pt.close(); dt.close() })
	p := startEngine(t, pb, Config{}.withRole(RolePrefill), WithTransfer(pt))
	d := startEngine(t, db, Config{}.withRole(RoleDecode), WithTransfer(dt))
	colo := startEngine(t, tinyref(t, 256), DefaultConfig())
	pd := &pdPair{prefill: p, decode: d}
	addr := pt.sender.Addr()

	run := func(req *gen.Request, room uint64) (result, gen.Event) {
		preq, dreq := *req, *req
		preq.Bootstrap = &gen.Bootstrap{Room: room, Addr: addr}
		dreq.Bootstrap = preq.Bootstrap
		dch, err := pd.decode.Generate(context.Background(), &dreq)
		require.NoError(t, err)
		pch, err := pd.prefill.Generate(context.Background(), &preq)
		require.NoError(t, err)
		pr := collect(t, pch)
		return collect(t, dch), pr.done
	}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &gen.Request{ID: fmt.Sprint("tcp", i), Prompt: prompt(fmt.Sprintf("%d: a longer prompt so that the KV spans several pages of sixteen tokens", i)),
				MaxTokens: 8, Sampling: kernels.Sampling{Temperature: 0.7, Seed: uint64(i)}}
			want := generate(t, colo, req).tokens
			got, pdone := run(req, uint64(100+i))
			if got.done.Err != nil || pdone.Err != nil || !slices.Equal(got.tokens, want) {
				t.Errorf("request %d over TCP: %v (err %v / %v), colocated %v", i, got.tokens, got.done.Err, pdone.Err, want)
			}
		}()
	}
	wg.Wait()

	corrupt.Store(2) // the second frame of the next transfer gets a flipped byte
	got, pdone := run(&gen.Request{ID: "corrupt", Prompt: prompt("this one is corrupted in flight, page two"), MaxTokens: 8}, 200)
	if !errors.Is(got.done.Err, gen.ErrTransfer) || len(got.tokens) != 0 {
		t.Fatalf("corrupted transfer: %d tokens, err %v", len(got.tokens), got.done.Err)
	}
	if pdone.Err == nil {
		t.Fatal("prefill leg of the corrupted transfer succeeded")
	}
	got, pdone = run(&gen.Request{ID: "after", Prompt: prompt("and the next one is fine"), MaxTokens: 8}, 201)
	if got.done.Err != nil || pdone.Err != nil {
		t.Fatalf("after corruption: %v / %v", got.done.Err, pdone.Err)
	}
	waitFor(t, "both idle", func() bool { return idle(p) && idle(d) })
}

func (Config) withRole(r Role) Config {
	c := DefaultConfig()
	c.Role = r
	return c
}
