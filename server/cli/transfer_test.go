package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"pdsoak/kernels"
	"pdsoak/server/engine"
	"pdsoak/server/gen"
	"pdsoak/server/kvtransfer"
)

// kvBackend is a kernels.Backend that only has a KV store: all newTransfer uses.
type kvBackend struct {
	kernels.Backend
	kv *kernels.KVStore
}

func (b kvBackend) KV() *kernels.KVStore { return b.kv }

type xferEvent struct {
	room  uint64
	n     int // Registered: pages; Received: first token
	err   error
	event string
}

// recSink records transfer events on a channel.
type recSink struct{ ch chan xferEvent }

func newRecSink() *recSink { return &recSink{ch: make(chan xferEvent, 16)} }

func (s *recSink) Registered(room uint64, pages int) {
	s.ch <- xferEvent{room: room, n: pages, event: "registered"}
}
func (s *recSink) Received(room uint64, firstToken int, err error) {
	s.ch <- xferEvent{room: room, n: firstToken, err: err, event: "received"}
}
func (s *recSink) Sent(room uint64, err error) {
	s.ch <- xferEvent{room: room, err: err, event: "sent"}
}

// next waits (bounded) for the next event named event, skipping others.
func (s *recSink) next(t *testing.T, event string) xferEvent {
	t.Helper()
	timeout := time.After(time.Minute) // a hang guard
	for {
		select {
		case ev := <-s.ch:
			if ev.event == event {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", event)
			return xferEvent{}
		}
	}
}

const (
	xferPageSize = 4
	xferLayers   = 2
	xferBytes    = 8 // per token per layer
)

type xferPair struct {
	pre, dec         *kvTransfer
	preKV, decKV     *kernels.KVStore
	preSink, decSink *recSink
}

// newXferPair starts a prefill and a decode adapter on loopback with the given semantics.
func newXferPair(t *testing.T, sem engine.Semantics, preOpts, decOpts []kvtransfer.Option) *xferPair {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	f := defaultWorkerFlags()
	f.bootstrapPort = 0
	f.limits.Semantics = sem
	p := &xferPair{preSink: newRecSink(), decSink: newRecSink()}
	var err error
	for _, kv := range []**kernels.KVStore{&p.preKV, &p.decKV} {
		if *kv, err = kernels.NewKVStore(16, xferPageSize, xferLayers, xferBytes); err != nil {
			t.Fatal(err)
		}
	}
	if p.pre, err = newTransfer(rolePrefill, kvBackend{kv: p.preKV}, f, prometheus.NewRegistry(), log, preOpts...); err != nil {
		t.Fatal(err)
	}
	if p.dec, err = newTransfer(roleDecode, kvBackend{kv: p.decKV}, f, prometheus.NewRegistry(), log, decOpts...); err != nil {
		_ = p.pre.Close()
		t.Fatal(err)
	}
	p.pre.Bind(p.preSink)
	p.dec.Bind(p.decSink)
	t.Cleanup(func() {
		_ = p.dec.Close()
		_ = p.pre.Close()
	})
	return p
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

func pagesFor(tokens int) int { return (tokens + xferPageSize - 1) / xferPageSize }

// TestTransferMovesExactlyThePrompt: decode registers the prompt's token count (not its
// pages × page size) and prefill sends exactly those tokens: the KV after the prompt in
// decode's last page is left alone, and the byte counter counts the prompt only.
func TestTransferMovesExactlyThePrompt(t *testing.T) {
	noHook := kvtransfer.WithHook(nil)
	p := newXferPair(t, engine.SemanticsStrict, []kvtransfer.Option{noHook}, nil)
	tests := []struct {
		name   string
		tokens int
	}{
		{"one token", 1},
		{"inside a page", 5},
		{"page boundary", 8},
		{"past a boundary", 9},
	}
	var moved float64
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			room := uint64(100 + i)
			// Like the scheduler: prefill holds the prompt and its first token, decode
			// allocates room for the first generated token too.
			src := make([]int32, pagesFor(tc.tokens+1))
			dst := make([]int32, pagesFor(tc.tokens+1))
			for j := range src {
				src[j] = int32(j)
				dst[j] = int32(len(dst) - 1 - j)
				for l := 0; l < xferLayers; l++ {
					b := p.preKV.LayerBytes(src[j], l)
					for k := range b {
						b[k] = byte(1 + j*31 + l*7 + k)
					}
					d := p.decKV.LayerBytes(dst[j], l)
					for k := range d {
						d[k] = 0xEE
					}
				}
			}
			p.dec.StartReceive(room, p.pre.bootstrapAddr, dst[:pagesFor(tc.tokens)], tc.tokens)
			p.pre.StartSend(room, src, tc.tokens, 42)
			if ev := p.preSink.next(t, "sent"); ev.err != nil || ev.room != room {
				t.Fatalf("sent %+v", ev)
			}
			if ev := p.decSink.next(t, "received"); ev.err != nil || ev.room != room || ev.n != 42 {
				t.Fatalf("received %+v", ev)
			}
			for j := range dst {
				for l := 0; l < xferLayers; l++ {
					got, want := p.decKV.LayerBytes(dst[j], l), p.preKV.LayerBytes(src[j], l)
					n := max(0, min(xferPageSize, tc.tokens-j*xferPageSize)) * xferBytes
					if !bytes.Equal(got[:n], want[:n]) {
						t.Fatalf("page %d layer %d: prompt KV differs", j, l)
					}
					if !bytes.Equal(got[n:], bytes.Repeat([]byte{0xEE}, len(got)-n)) {
						t.Fatalf("page %d layer %d: KV past the prompt (%d bytes in) was overwritten", j, l, n)
					}
				}
			}
			moved += float64(tc.tokens * xferLayers * xferBytes)
			if got := counterValue(t, p.pre.bytes); got != moved {
				t.Fatalf("prefill counted %v bytes, want %v", got, moved)
			}
		})
	}
}

// TestTransferTokenCountMismatchFails: prefill and decode disagreeing on the prompt
// length is an explicit transfer error on both sides, never silently padded KV.
func TestTransferTokenCountMismatchFails(t *testing.T) {
	p := newXferPair(t, engine.SemanticsStrict, []kvtransfer.Option{kvtransfer.WithHook(nil)}, nil)
	const room = 7
	p.dec.StartReceive(room, p.pre.bootstrapAddr, []int32{0, 1}, 5)
	p.pre.StartSend(room, []int32{3, 4}, 6, 9)
	if ev := p.preSink.next(t, "sent"); !errors.Is(ev.err, gen.ErrTransfer) {
		t.Fatalf("prefill: %v, want a transfer error", ev.err)
	}
	if ev := p.decSink.next(t, "received"); !errors.Is(ev.err, gen.ErrTransfer) {
		t.Fatalf("decode: %v, want a transfer error", ev.err)
	}
}

// TestTransferProgressBoundFollowsSemantics: a sender that stalls between two frames of
// a room fails the room under strict semantics (the receiver's progress bound) and does
// not under sglang semantics, where SGLang has no bound on Transferring; the transfer
// completes when the sender resumes.
//
// kvtransfer buffers page frames until the next control message or heartbeat, so the
// first frame reaches decode with prefill's next heartbeat: a short heartbeat interval
// gets it there well inside the sglang case's quiet window (were it late, that case
// would pass without proving anything, never fail; the strict case shows the frame
// arrives).
func TestTransferProgressBoundFollowsSemantics(t *testing.T) {
	const bound = 50 * time.Millisecond
	tests := []struct {
		sem      engine.Semantics
		wantFail bool
	}{
		{engine.SemanticsStrict, true},
		{engine.SemanticsSGLang, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.sem), func(t *testing.T) {
			release := make(chan struct{})
			frames := 0
			hook := func(ctx context.Context, name string) (string, error) {
				if name != kvtransfer.HookSendFrame {
					return "", nil
				}
				if frames++; frames == 2 { // one frame has arrived: stall mid-room
					select {
					case <-release:
					case <-ctx.Done():
						return "", fmt.Errorf("stall ended: %w", ctx.Err())
					}
				}
				return "", nil
			}
			p := newXferPair(t, tc.sem, []kvtransfer.Option{kvtransfer.WithHook(hook), kvtransfer.WithHeartbeat(5*time.Millisecond, 5*time.Second)},
				[]kvtransfer.Option{kvtransfer.WithProgressTimeout(bound)})
			const room = 11
			p.dec.StartReceive(room, p.pre.bootstrapAddr, []int32{0, 1}, 6)
			p.pre.StartSend(room, []int32{0, 1}, 6, 3)
			if tc.wantFail {
				ev := p.decSink.next(t, "received")
				close(release)
				if !errors.Is(ev.err, gen.ErrTransfer) || !errors.Is(ev.err, kvtransfer.ErrTimeout) {
					t.Fatalf("decode: %v, want a progress timeout", ev.err)
				}
				if ev := p.preSink.next(t, "sent"); ev.err == nil {
					t.Fatal("prefill: send succeeded after decode failed the room")
				}
				return
			}
			select {
			case ev := <-p.decSink.ch:
				t.Fatalf("decode ended the stalled room: %+v", ev)
			case <-time.After(10 * bound):
			}
			close(release)
			if ev := p.decSink.next(t, "received"); ev.err != nil || ev.n != 3 {
				t.Fatalf("decode: %+v", ev)
			}
			if ev := p.preSink.next(t, "sent"); ev.err != nil {
				t.Fatalf("prefill: %v", ev.err)
			}
		})
	}
}

func TestHeartbeatFlags(t *testing.T) {
	tests := []struct {
		name           string
		interval       time.Duration
		maxFailure     int
		wantOK         bool
		wantInt, wantI time.Duration
	}{
		{"unset: the transfer's defaults", 0, 0, false, 0, 0},
		{"SGLang's defaults: 5 s, 2 failures", 5 * time.Second, 2, true, 5 * time.Second, 10 * time.Second},
		{"one failure still allows one late beat", time.Second, 1, true, time.Second, 2 * time.Second},
		{"interval only keeps the idle default", 500 * time.Millisecond, 0, true, 500 * time.Millisecond, kvtransfer.DefaultIdleTimeout},
		{"a long interval stretches the idle bound", 4 * time.Second, 0, true, 4 * time.Second, 8 * time.Second},
		{"max failures only: default interval", 0, 3, true, kvtransfer.DefaultHeartbeatInterval, 3 * kvtransfer.DefaultHeartbeatInterval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &workerFlags{heartbeatInterval: secondsValue(tt.interval), heartbeatMaxFailure: tt.maxFailure}
			interval, idle, ok := f.heartbeat()
			require.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.wantInt, interval)
			assert.Equal(t, tt.wantI, idle)
		})
	}
}
