package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

type pdPair struct {
	hub             *fakeHub
	prefill, decode *Engine
}

func startPD(t *testing.T, pb, db kernels.Backend, pcfg, dcfg Config) *pdPair {
	t.Helper()
	hub := newFakeHub()
	pcfg.Role, dcfg.Role = RolePrefill, RoleDecode
	p := startEngine(t, pb, pcfg, WithTransfer(hub.transfer(RolePrefill, pb.KV())))
	d := startEngine(t, db, dcfg, WithTransfer(hub.transfer(RoleDecode, db.KV())))
	return &pdPair{hub: hub, prefill: p, decode: d}
}

// run sends both legs of a request the way the router does and returns the decode
// leg's result and the prefill leg's Done event.
func (pd *pdPair) run(t *testing.T, ctx context.Context, req *gen.Request, room uint64) (result, gen.Event) {
	t.Helper()
	preq, dreq := *req, *req
	preq.Bootstrap = &gen.Bootstrap{Room: room, Addr: "prefill:8998"}
	dreq.Bootstrap = preq.Bootstrap
	dch, err := pd.decode.Generate(ctx, &dreq)
	if err != nil {
		t.Fatalf("decode leg: %v", err)
	}
	pch, err := pd.prefill.Generate(ctx, &preq)
	if err != nil {
		t.Fatalf("prefill leg: %v", err)
	}
	var pdone result
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); pdone = collect(t, pch) }()
	r := collect(t, dch)
	wg.Wait()
	return r, pdone.done
}

// TestPDMatchesColocated: greedy and seeded sampling through prefill → transfer →
// decode give the same tokens as a colocated engine with the same weights (I5), alone and
// under concurrency, and both workers drain to zero.
func TestPDMatchesColocated(t *testing.T) {
	colo := startEngine(t, tinyref(t, 512), DefaultConfig())
	pcfg := DefaultConfig()
	pcfg.ChunkedPrefillSize = 7 // prefill in chunks; colocated in one piece
	pd := startPD(t, tinyref(t, 512), tinyref(t, 512), pcfg, DefaultConfig())
	reqs := make([]*gen.Request, 10)
	want := make([][]int, len(reqs))
	for i := range reqs {
		reqs[i] = &gen.Request{ID: fmt.Sprint("pd", i), Prompt: prompt(fmt.Sprintf("agent %d: write the file, then save it", i)),
			MaxTokens: 10 + i, Sampling: kernels.Sampling{Temperature: float64(i%3) * 0.5, Seed: uint64(100 + i)}}
		want[i] = generate(t, colo, reqs[i]).tokens
	}
	// Alone.
	r, pdone := pd.run(t, context.Background(), reqs[0], 1)
	if r.done.Err != nil || pdone.Err != nil || !slices.Equal(r.tokens, want[0]) {
		t.Fatalf("PD alone: %v (err %v, prefill %v), colocated %v", r.tokens, r.done.Err, pdone.Err, want[0])
	}
	// Concurrently.
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, pdone := pd.run(t, context.Background(), reqs[i], uint64(10+i))
			if r.done.Err != nil || pdone.Err != nil || !slices.Equal(r.tokens, want[i]) {
				t.Errorf("PD request %d: %v (err %v, prefill %v), colocated %v", i, r.tokens, r.done.Err, pdone.Err, want[i])
			}
		}()
	}
	wg.Wait()
	waitFor(t, "both workers idle", func() bool { return idle(pd.prefill) && idle(pd.decode) })
}

// TestPDTransferFailure: a checksum failure ends the decode request with
// gen.ErrTransfer (never tokens computed from garbage) and frees pages on both sides;
// the next request is unaffected.
func TestPDTransferFailure(t *testing.T) {
	pd := startPD(t, newFakeBackend(64, 4), newFakeBackend(64, 4), DefaultConfig(), DefaultConfig())
	pd.hub.mu.Lock()
	pd.hub.corrupt[7] = true
	pd.hub.mu.Unlock()
	req := &gen.Request{ID: "bad", Prompt: []int{0, 5, 6, 7, 8}, MaxTokens: 6, IgnoreEOS: true}
	r, pdone := pd.run(t, context.Background(), req, 7)
	var se *gen.StageError
	if !errors.Is(r.done.Err, gen.ErrTransfer) || !errors.As(r.done.Err, &se) || se.Stage != "transfer" || len(r.tokens) != 0 {
		t.Fatalf("decode leg: %d tokens, err %v; want a transfer-stage ErrTransfer", len(r.tokens), r.done.Err)
	}
	if !errors.Is(pdone.Err, gen.ErrTransfer) {
		t.Fatalf("prefill leg: %v", pdone.Err)
	}
	r, pdone = pd.run(t, context.Background(), req, 8)
	if r.done.Err != nil || pdone.Err != nil || len(r.tokens) != 6 {
		t.Fatalf("next request: %d tokens, %v / %v", len(r.tokens), r.done.Err, pdone.Err)
	}
	waitFor(t, "idle", func() bool { return idle(pd.prefill) && idle(pd.decode) })
	if got := value(pd.decode.m.transferFailed); got != 1 {
		t.Fatalf("decode transfer failures %v", got)
	}
}

// TestPDTransferTokenCounts: both legs hand their transfer the prompt's token count (not
// pages × page size), and legs that disagree on it (a router bug) fail explicitly on
// both sides instead of decoding from padded KV.
func TestPDTransferTokenCounts(t *testing.T) {
	pd := startPD(t, newFakeBackend(64, 4), newFakeBackend(64, 4), DefaultConfig(), DefaultConfig())
	for i, n := range []int{1, 4, 5, 9} { // page size 4: inside, at and past page boundaries
		p := make([]int, n)
		for j := range p {
			p[j] = 2 + (i+j)%50
		}
		room := uint64(20 + i)
		r, pdone := pd.run(t, context.Background(), &gen.Request{ID: fmt.Sprint("n", n), Prompt: p, MaxTokens: 3, IgnoreEOS: true}, room)
		if r.done.Err != nil || pdone.Err != nil || len(r.tokens) != 3 {
			t.Fatalf("prompt of %d: %d tokens, %v / %v", n, len(r.tokens), r.done.Err, pdone.Err)
		}
		pd.hub.mu.Lock()
		sent := pd.hub.sent[room]
		pd.hub.mu.Unlock()
		if sent != n {
			t.Fatalf("prompt of %d tokens: prefill sent %d", n, sent)
		}
	}

	dreq := &gen.Request{ID: "mismatch", Prompt: []int{0, 5, 6, 7, 8}, MaxTokens: 3, IgnoreEOS: true,
		Bootstrap: &gen.Bootstrap{Room: 30, Addr: "prefill:8998"}}
	preq := *dreq
	preq.Prompt = []int{0, 5, 6, 7, 8, 9}
	dch, err := pd.decode.Generate(context.Background(), dreq)
	require.NoError(t, err)
	pch, err := pd.prefill.Generate(context.Background(), &preq)
	require.NoError(t, err)
	if r := collect(t, pch); !errors.Is(r.done.Err, gen.ErrTransfer) {
		t.Fatalf("prefill leg: %v, want ErrTransfer", r.done.Err)
	}
	if r := collect(t, dch); !errors.Is(r.done.Err, gen.ErrTransfer) || len(r.tokens) != 0 {
		t.Fatalf("decode leg: %d tokens, %v, want ErrTransfer", len(r.tokens), r.done.Err)
	}
	waitFor(t, "idle", func() bool { return idle(pd.prefill) && idle(pd.decode) })
}

// TestPDDecodeAbort: a client that goes away while its request waits for KV frees the
// decode pages and cancels the transfer.
func TestPDDecodeAbort(t *testing.T) {
	pd := startPD(t, newFakeBackend(64, 4), newFakeBackend(64, 4), DefaultConfig(), DefaultConfig())
	ctx, cancel := context.WithCancel(context.Background())
	// Only the decode leg: it preallocates and waits in the transfer queue.
	ch, err := pd.decode.Generate(ctx, &gen.Request{ID: "gone", Prompt: []int{0, 5, 6, 7, 8}, MaxTokens: 4,
		Bootstrap: &gen.Bootstrap{Room: 3, Addr: "prefill:1"}})
	require.NoError(t, err)
	waitFor(t, "transfer stage", func() bool {
		rs := pd.decode.Requests()
		return len(rs) == 1 && rs[0].Stage == "transfer" && rs[0].Room != nil && *rs[0].Room == 3 && rs[0].Pages == 2
	})
	cancel()
	if r := collect(t, ch); !errors.Is(r.done.Err, gen.ErrAborted) {
		t.Fatalf("got %v", r.done.Err)
	}
	waitFor(t, "decode idle", func() bool { return idle(pd.decode) })
	pd.hub.mu.Lock()
	defer pd.hub.mu.Unlock()
	if !slices.Contains(pd.hub.cancels, 3) {
		t.Fatalf("transfer of room 3 not cancelled: %v", pd.hub.cancels)
	}
}

// TestPDStrictBounds: in strict semantics a decode leg whose prefill never sends ends
// with a transfer-stage timeout, and a prefill leg whose decode never registers ends
// with a bootstrap-stage timeout.
func TestPDStrictBounds(t *testing.T) {
	dcfg, pcfg := DefaultConfig(), DefaultConfig()
	dcfg.TransferTimeout = 30 * time.Millisecond
	pcfg.BootstrapTimeout = 30 * time.Millisecond
	pd := startPD(t, newFakeBackend(64, 4), newFakeBackend(64, 4), pcfg, dcfg)
	dch, err := pd.decode.Generate(context.Background(), &gen.Request{ID: "d", Prompt: []int{0, 5}, MaxTokens: 4,
		Bootstrap: &gen.Bootstrap{Room: 1, Addr: "nowhere:1"}})
	require.NoError(t, err)
	pch, err := pd.prefill.Generate(context.Background(), &gen.Request{ID: "p", Prompt: []int{0, 5}, MaxTokens: 4,
		Bootstrap: &gen.Bootstrap{Room: 2}})
	require.NoError(t, err)
	for _, c := range []struct {
		ch    <-chan gen.Event
		stage string
	}{{dch, "transfer"}, {pch, "bootstrap"}} {
		r := collect(t, c.ch)
		var se *gen.StageError
		if !errors.As(r.done.Err, &se) || se.Stage != c.stage || !errors.Is(r.done.Err, gen.ErrTimeout) {
			t.Fatalf("want a %s timeout, got %v", c.stage, r.done.Err)
		}
	}
	waitFor(t, "idle", func() bool { return idle(pd.prefill) && idle(pd.decode) })
	if got := value(pd.prefill.m.bootstrapFailed); got != 1 {
		t.Fatalf("bootstrap failures %v", got)
	}
}

// TestDecodeHeadOfLine: the same decode load in both semantics. SGLang: a head request
// larger than the pool wedges the prealloc queue; the request behind it never moves,
// /health stays green and the gauges stay frozen. Strict: the head is refused at once and
// the request behind it completes.
func TestDecodeHeadOfLine(t *testing.T) {
	for _, sem := range []Semantics{SemanticsSGLang, SemanticsStrict} {
		t.Run(string(sem), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Semantics = sem
			cfg.ReservedDecodeTokens = 0
			pd := startPD(t, newFakeBackend(64, 4), newFakeBackend(16, 4), DefaultConfig(), cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			big := &gen.Request{ID: "big", Prompt: make([]int, 80), MaxTokens: 4, Bootstrap: &gen.Bootstrap{Room: 1, Addr: "p:1"}}
			bch, berr := pd.decode.Generate(ctx, big)
			small := &gen.Request{ID: "small", Prompt: []int{0, 5, 6}, MaxTokens: 4, IgnoreEOS: true}
			if sem == SemanticsStrict {
				if !errors.Is(berr, gen.ErrContextLength) {
					t.Fatalf("strict: oversized head admitted: %v", berr)
				}
				r, _ := pd.run(t, ctx, small, 2)
				if r.done.Err != nil || len(r.tokens) != 4 {
					t.Fatalf("strict: small request: %v", r.done.Err)
				}
				return
			}
			if berr != nil {
				t.Fatal(berr)
			}
			dreq := *small
			dreq.Bootstrap = &gen.Bootstrap{Room: 2, Addr: "p:1"}
			sch, err := pd.decode.Generate(ctx, &dreq)
			require.NoError(t, err)
			waitFor(t, "both in prealloc", func() bool {
				rs := pd.decode.Requests()
				return len(rs) == 2 && rs[0].Stage == "prealloc" && rs[1].Stage == "prealloc"
			})
			time.Sleep(50 * time.Millisecond) // many loop ticks: nothing moves
			if rs := pd.decode.Requests(); rs[1].Stage != "prealloc" {
				t.Fatalf("small request left prealloc: %+v", rs[1])
			}
			if err := pd.decode.Healthy(); err != nil {
				t.Fatalf("sglang health should stay green while wedged: %v", err)
			}
			if got := value(pd.decode.m.decPrealloc); got != 0 {
				t.Fatalf("sglang prealloc gauge %v: should be frozen at its last refresh", got)
			}
			cancel()
			collect(t, bch)
			collect(t, sch)
			waitFor(t, "decode idle", func() bool { return pd.decode.live.Load() == 0 })
		})
	}
}

// TestRequestsListsAdmittedAtOnce: the request list is built when asked for, so a request
// is listed as soon as Generate has admitted it and gone as soon as it has ended, with
// no wait for a periodic refresh.
func TestRequestsListsAdmittedAtOnce(t *testing.T) {
	pd := startPD(t, newFakeBackend(64, 4), newFakeBackend(64, 4), DefaultConfig(), DefaultConfig())
	var cancels []context.CancelFunc
	var chans []<-chan gen.Event
	for i := range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		// Decode legs whose prefill never sends: they wait in the transfer queue.
		ch, err := pd.decode.Generate(ctx, &gen.Request{ID: fmt.Sprint("r", i), Prompt: []int{0, 5}, MaxTokens: 2,
			Bootstrap: &gen.Bootstrap{Room: uint64(100 + i), Addr: "p:1"}})
		require.NoError(t, err)
		cancels, chans = append(cancels, cancel), append(chans, ch)
		require.Len(t, pd.decode.Requests(), i+1, "listed right after admission")
	}
	for i, cancel := range cancels {
		cancel()
		collect(t, chans[i])
		require.Len(t, pd.decode.Requests(), len(cancels)-i-1, "gone right after its end")
	}
}
