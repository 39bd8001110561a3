package engine

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"sort"
	"sync"
	"time"

	"pdsoak/kernels"
)

// fakeBackend is a deterministic "model" that really uses the paged KV store: Forward
// writes each token id into its page slot and samples the next token from a hash of
// every token read back through the page table, so a wrong page table changes the output.
type fakeBackend struct {
	kv    *kernels.KVStore
	info  kernels.ModelInfo
	step  time.Duration // StepTime of every step
	eosAt int           // sample EOS when the position is a multiple of eosAt (0: never)

	mu    sync.Mutex
	steps int
	fail  error // returned by the next Forward
}

func newFakeBackend(pages, pageSize int) *fakeBackend {
	kv, err := kernels.NewKVStore(pages, pageSize, 1, 4)
	if err != nil {
		panic(err)
	}
	return &fakeBackend{kv: kv, info: kernels.ModelInfo{Name: "fake", VocabSize: 64, BOS: 0, EOS: 1, Layers: 1,
		KVBytesPerTokenPerLayer: 4, ModelKVBytesPerToken: 4}}
}

func (f *fakeBackend) Info() kernels.ModelInfo { return f.info }
func (f *fakeBackend) KV() *kernels.KVStore    { return f.kv }
func (f *fakeBackend) StepTime(p, d int) time.Duration {
	return f.step
}

func (f *fakeBackend) slot(pages []int32, pos int) *float32 {
	ps := f.kv.PageSize
	return &f.kv.LayerFloats(pages[pos/ps], 0)[pos%ps]
}

func (f *fakeBackend) Forward(batch []kernels.SeqInput, out []int) error {
	f.mu.Lock()
	f.steps++
	fail := f.fail
	f.fail = nil
	f.mu.Unlock()
	if fail != nil {
		return fail
	}
	for i, in := range batch {
		for j, t := range in.Tokens {
			*f.slot(in.Pages, in.Pos+j) = float32(t)
		}
		out[i] = -1
		if !in.Sample {
			continue
		}
		last := in.Pos + len(in.Tokens) // tokens 0..last-1 are cached now
		h := fnv.New64a()
		var b [8]byte
		for p := 0; p < last; p++ {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(float64(*f.slot(in.Pages, p))))
			h.Write(b[:])
		}
		if f.eosAt > 0 && last%f.eosAt == 0 {
			out[i] = f.info.EOS
			continue
		}
		out[i] = 2 + int(h.Sum64()%uint64(f.info.VocabSize-2))
	}
	return nil
}

// fakeClock is a manual clock: After fires when Advance passes its deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	calls   int // After calls so far: a new one means the engine waits on the clock again
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	return ch
}

// afterCalls is how many times After was called.
func (c *fakeClock) afterCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	sort.Slice(c.waiters, func(i, j int) bool { return c.waiters[i].at.Before(c.waiters[j].at) })
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			keep = append(keep, w)
		}
	}
	c.waiters = keep
}

// fakeTransfer connects one prefill engine's KV store to one decode engine's in memory.
// The prompt's tokens are copied when prefill's StartSend meets decode's StartReceive for
// the same room, the way server/kvtransfer moves them over TCP (and, like it, a token
// count that differs between the two sides fails the room).
type fakeTransfer struct {
	hub  *fakeHub
	kv   *kernels.KVStore
	sink TransferSink
	role Role
}

type fakeHub struct {
	mu      sync.Mutex
	prefill *fakeTransfer
	decode  *fakeTransfer
	recv    map[uint64][]int32 // room → decode destination pages
	tokens  map[uint64]int     // room → tokens decode registered
	sent    map[uint64]int     // room → tokens prefill sent
	corrupt map[uint64]bool    // rooms whose transfer fails its checksum
	cancels []uint64
}

func newFakeHub() *fakeHub {
	return &fakeHub{recv: map[uint64][]int32{}, tokens: map[uint64]int{}, sent: map[uint64]int{}, corrupt: map[uint64]bool{}}
}

func (h *fakeHub) transfer(role Role, kv *kernels.KVStore) *fakeTransfer {
	t := &fakeTransfer{hub: h, kv: kv, role: role}
	if role == RolePrefill {
		h.prefill = t
	} else {
		h.decode = t
	}
	return t
}

func (t *fakeTransfer) Bind(s TransferSink) { t.sink = s }

func (t *fakeTransfer) StartReceive(room uint64, addr string, pages []int32, numTokens int) {
	h := t.hub
	h.mu.Lock()
	h.recv[room] = append([]int32(nil), pages...)
	h.tokens[room] = numTokens
	p := h.prefill
	h.mu.Unlock()
	if p != nil {
		p.sink.Registered(room, len(pages))
	}
}

func (t *fakeTransfer) StartSend(room uint64, pages []int32, numTokens, firstToken int) {
	h := t.hub
	h.mu.Lock()
	dst, ok := h.recv[room]
	registered := h.tokens[room]
	delete(h.recv, room)
	delete(h.tokens, room)
	h.sent[room] = numTokens
	bad := h.corrupt[room]
	d := h.decode
	h.mu.Unlock()
	if !ok || d == nil {
		t.sink.Sent(room, errNoReceiver)
		return
	}
	ps := t.kv.PageSize
	need := (numTokens + ps - 1) / ps
	switch {
	case numTokens != registered || need > len(pages) || need > len(dst):
		t.sink.Sent(room, errShape)
		d.sink.Received(room, -1, errShape)
		return
	case bad:
		t.sink.Sent(room, errChecksum)
		d.sink.Received(room, 0, errChecksum)
		return
	}
	for i := 0; i < need; i++ {
		n := min(ps, numTokens-i*ps) * t.kv.BytesPerToken
		for l := 0; l < t.kv.Layers; l++ {
			copy(d.kv.LayerBytes(dst[i], l)[:n], t.kv.LayerBytes(pages[i], l)[:n])
		}
	}
	t.sink.Sent(room, nil)
	d.sink.Received(room, firstToken, nil)
}

func (t *fakeTransfer) Cancel(room uint64) {
	t.hub.mu.Lock()
	defer t.hub.mu.Unlock()
	t.hub.cancels = append(t.hub.cancels, room)
}

type constErr string

func (e constErr) Error() string { return string(e) }

const (
	errNoReceiver = constErr("fake transfer: no receiver registered")
	errChecksum   = constErr("fake transfer: crc32c mismatch on page 0")
	errShape      = constErr("fake transfer: prefill and decode disagree on the token count")
)
