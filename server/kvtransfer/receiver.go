package kvtransfer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

// Receiver is the decode side: it dials each prefill worker once, registers rooms on that
// connection and writes the page frames it receives into its KVStore.
type Receiver struct {
	cfg   config
	store *kernels.KVStore
	shape Shape

	ctx    context.Context // ends at Close; aborts dials
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards everything below and every write into store by a frame
	conns  map[string]*rconn
	rooms  map[uint64]*Transfer
	closed bool
}

// rconn is the receiver's connection to one prefill address.
type rconn struct {
	addr  string
	l     *link // nil while dialing
	rooms map[uint64]*Transfer

	guard pageGuard
	// Reused by the connection's reader (onPages) only.
	es      []Entry
	dst, rd [][]byte
}

// Result is how a Transfer ended.
type Result struct {
	// FirstToken is the token prefill sampled after the prompt (valid when Err is nil).
	FirstToken int
	// Err wraps gen.ErrTransfer when the transfer failed.
	Err error
}

// Transfer is one room being received.
type Transfer struct {
	r         *Receiver
	room      uint64
	dest      []int32
	numTokens int
	start     time.Time

	// Under r.mu:
	conn     *rconn
	live     bool
	acked    bool
	got      []bool // [page index * layers + layer]
	received int
	expected int
	bytes    int64
	timer    *time.Timer
	reading  bool        // the connection's reader is writing payloads into dest (onPages)
	gone     atomic.Bool // set by endLocked: the reader's writes go elsewhere (pageGuard)
	step     uint64      // counts armLocked calls: a timer of an earlier step does nothing
	stepWhat string      // what the current step waits for
	stepAt   time.Time   // when the current step (re)started
	stopCtx  func() bool

	done   chan Result
	once   sync.Once
	result Result
}

// Room is the transfer's bootstrap room.
func (t *Transfer) Room() uint64 { return t.room }

// Done yields the result once, then is closed.
func (t *Transfer) Done() <-chan Result { return t.done }

// Cancel aborts the transfer (decode no longer wants it) and tells prefill with FAIL. No
// byte lands in the transfer's destination pages once Cancel returns.
func (t *Transfer) Cancel(reason string) {
	t.r.fail(t, fmt.Errorf("kvtransfer: room %d cancelled by decode: %s: %w", t.room, reason, gen.ErrTransfer), true)
}

// NewReceiver returns a receiver that writes pages into store.
func NewReceiver(store *kernels.KVStore, opts ...Option) *Receiver {
	ctx, cancel := context.WithCancel(context.Background())
	return &Receiver{
		cfg: newConfig(opts), store: store, ctx: ctx, cancel: cancel,
		shape: Shape{uint32(store.PageSize), uint32(store.Layers), uint32(store.BytesPerToken)},
		conns: map[string]*rconn{}, rooms: map[uint64]*Transfer{},
	}
}

// Start registers room with the prefill worker whose bootstrap address is prefillAddr:
// numTokens tokens of KV will land in destPages. It does not block on the network (the
// dial and handshake run in the background, so a slow prefill never stalls the caller);
// every outcome, including a failed dial, arrives on the Transfer's Done channel.
// Cancelling ctx cancels the transfer. Start fails at once only on bad arguments, a
// duplicate room or a closed receiver.
func (r *Receiver) Start(ctx context.Context, prefillAddr string, room uint64, destPages []int32, numTokens int) (*Transfer, error) {
	if room == 0 {
		return nil, fmt.Errorf("kvtransfer: room 0 is reserved: %w", gen.ErrInvalid)
	}
	ps := r.store.PageSize
	need := (numTokens + ps - 1) / ps
	if numTokens <= 0 || len(destPages) < need || numTokens > 1<<31-1 {
		return nil, fmt.Errorf("%w: %d destination pages for %d tokens", ErrShape, len(destPages), numTokens)
	}
	for _, p := range destPages[:need] {
		if p < 0 || int(p) >= r.store.NumPages {
			return nil, fmt.Errorf("%w: destination page %d out of range", ErrShape, p)
		}
	}
	t := &Transfer{r: r, room: room, dest: append([]int32(nil), destPages[:need]...), numTokens: numTokens,
		start: time.Now(), live: true, expected: need * r.store.Layers, done: make(chan Result, 1)}
	t.got = make([]bool, t.expected)

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := r.rooms[room]; ok {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: room %d", ErrDuplicate, room)
	}
	c := r.conns[prefillAddr]
	if c == nil {
		c = &rconn{addr: prefillAddr, rooms: map[uint64]*Transfer{}}
		r.conns[prefillAddr] = c
		r.wg.Add(1)
		go r.run(c)
	}
	r.rooms[room] = t
	c.rooms[room] = t
	t.conn = c
	if c.l != nil {
		r.registerLocked(c, t)
	}
	// The callback runs on its own goroutine and takes r.mu, so it cannot see t half made.
	t.stopCtx = context.AfterFunc(ctx, func() {
		r.fail(t, fmt.Errorf("kvtransfer: room %d: %w: %w", room, gen.ErrTransfer, context.Cause(ctx)), true)
	})
	r.mu.Unlock()
	return t, nil
}

// registerLocked sends REGISTER and bounds the wait for REGISTER_ACK.
func (r *Receiver) registerLocked(c *rconn, t *Transfer) {
	c.l.Enqueue(MsgRegister, t.room, AppendRegister(nil, Register{NumTokens: uint32(t.numTokens), Pages: t.dest}))
	t.armLocked(r.cfg.handshakeTimeout, StepRegisterAck)
}

// armLocked (re)starts the room's step timer: the step must be over within d.
func (t *Transfer) armLocked(d time.Duration, what string) {
	t.step++
	t.stepWhat, t.stepAt = what, time.Now()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if d <= 0 {
		return
	}
	step := t.step
	t.timer = time.AfterFunc(d, func() { t.expire(step, d, what) })
}

// progressLocked restarts the bound of a step that repeats (one per frame). Re-arming a
// timer per frame costs more than the frame's bookkeeping, so only the time is recorded;
// a timer that fires early re-arms itself for the rest (expire).
func (t *Transfer) progressLocked(d time.Duration, what string) {
	if t.timer == nil || t.stepWhat != what {
		t.armLocked(d, what)
		return
	}
	t.stepAt = time.Now()
}

// expire fails the room unless its step changed or, for a step that repeats, was
// restarted less than d ago.
func (t *Transfer) expire(step uint64, d time.Duration, what string) {
	r := t.r
	r.mu.Lock()
	if !t.live || t.step != step {
		r.mu.Unlock()
		return
	}
	if rest := d - time.Since(t.stepAt); rest > 0 {
		t.timer.Reset(rest)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.fail(t, StepTimeoutError(t.room, what, d), true)
}

// fail ends a live transfer with err; with notify, prefill is told with FAIL.
func (r *Receiver) fail(t *Transfer, err error, notify bool) {
	r.mu.Lock()
	if !t.live {
		r.mu.Unlock()
		return
	}
	r.endLocked(t)
	if notify && t.conn.l != nil {
		t.conn.l.Enqueue(MsgFail, t.room, []byte(clipReason(err.Error())))
	}
	reading := t.reading
	r.mu.Unlock()
	if reading {
		t.conn.guard.barrier() // the write into t's pages in progress, if any, is over
	}
	r.cfg.logger.Warn("kvtransfer: transfer failed", "room", t.room, "prefill", t.conn.addr, "err", err)
	t.deliver(Result{Err: err})
}

// endLocked removes t. No frame is written into its pages after this returns, except
// by a write of the reader already under way, which fail waits for (pageGuard).
func (r *Receiver) endLocked(t *Transfer) {
	t.live = false
	t.gone.Store(true)
	if t.timer != nil {
		t.timer.Stop()
	}
	delete(r.rooms, t.room)
	delete(t.conn.rooms, t.room)
}

func (t *Transfer) deliver(res Result) {
	t.once.Do(func() {
		if t.stopCtx != nil {
			t.stopCtx()
		}
		t.result = res
		t.done <- res
		close(t.done)
		if cb := t.r.cfg.onComplete; cb != nil {
			cb(Stats{Room: t.room, Bytes: t.bytes, Frames: t.received, Duration: time.Since(t.start), Err: res.Err})
		}
	})
}

// run dials prefill, shakes hands, registers the waiting rooms and reads until the
// connection dies; then every room on it fails.
func (r *Receiver) run(c *rconn) {
	defer r.wg.Done()
	l, err := r.dial(c.addr)
	if err == nil {
		r.mu.Lock()
		if r.closed {
			err = ErrClosed
		} else {
			c.l = l
			for _, t := range c.rooms {
				r.registerLocked(c, t)
			}
		}
		r.mu.Unlock()
	}
	if err == nil {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); l.writeLoop() }()
		err = r.readLoop(c, l)
		if de := l.err(); de != nil {
			err = de
		}
	}
	if l != nil {
		l.kill(err)
	}
	r.mu.Lock()
	if r.conns[c.addr] == c && (!r.cfg.staleEndpoints || c.l == nil) {
		delete(r.conns, c.addr) // staleEndpoints: a connection that once worked stays
	}
	rooms := make([]*Transfer, 0, len(c.rooms))
	for _, t := range c.rooms {
		rooms = append(rooms, t)
	}
	r.mu.Unlock()
	for _, t := range rooms {
		r.fail(t, fmt.Errorf("room %d: prefill %s: %w", t.room, c.addr, err), false)
	}
}

func (r *Receiver) dial(addr string) (*link, error) {
	d := net.Dialer{Timeout: r.cfg.dialTimeout}
	conn, err := d.DialContext(r.ctx, "tcp", addr)
	if err != nil {
		if r.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("%w: dial prefill %s: %w", ErrConnection, addr, err)
	}
	l := newLink(conn, &r.cfg)
	l.maxPage = r.shape.PageSize * r.shape.BytesPerToken
	stop := context.AfterFunc(r.ctx, func() { l.kill(ErrClosed) })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(r.cfg.handshakeTimeout))
	if _, err := conn.Write(appendMessage(nil, MsgHello, 0, AppendShape(nil, r.shape))); err != nil {
		l.kill(err)
		return nil, fmt.Errorf("%w: hello to %s: %w", ErrConnection, addr, err)
	}
	h, body, _, err := ReadMessage(l.br, nil)
	if err == nil {
		switch h.Type {
		case MsgHelloAck:
			var shape Shape
			if shape, err = ParseShape(body); err == nil && shape != r.shape {
				err = fmt.Errorf("%w: prefill has %s, decode has %s", ErrShape, shape, r.shape)
			}
		case MsgFail:
			reason, _ := ParseFail(body)
			err = fmt.Errorf("%w: prefill refused the connection: %s", ErrPeer, reason)
		default:
			err = fmt.Errorf("%w: expected HELLO_ACK, got %s", ErrProtocol, h.Type)
		}
	}
	if err != nil {
		if de := l.err(); de != nil {
			err = de
		}
		l.kill(err)
		if !errors.Is(err, gen.ErrTransfer) {
			err = fmt.Errorf("%w: handshake with %s: %w", ErrConnection, addr, err)
		}
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return l, nil
}

func (r *Receiver) readLoop(c *rconn, l *link) error {
	var buf []byte
	for {
		h, body, nbuf, err := l.read(buf)
		buf = nbuf
		if err != nil {
			return err
		}
		switch h.Type {
		case MsgHeartbeat:
		case MsgRegisterAck:
			r.mu.Lock()
			if t := c.rooms[h.Room]; t != nil && !t.acked {
				t.acked = true
				// Waiting for prefill's forward pass is the engine's bound, or (sglang
				// semantics) SGLANG_DISAGGREGATION_WAITING_TIMEOUT's: WithWaitingTimeout.
				t.armLocked(r.cfg.waitingTimeout, StepFirstFrame)
			}
			r.mu.Unlock()
		case MsgPages:
			if err := r.onPages(c, l, h, body); err != nil {
				return err
			}
		case MsgDone:
			d, err := ParseDone(body)
			if err != nil {
				return err
			}
			r.onDone(c, h.Room, d)
		case MsgFail:
			reason, err := ParseFail(body)
			if err != nil {
				return err
			}
			if h.Room == 0 {
				return fmt.Errorf("%w: prefill %s closed the connection: %s", ErrPeer, c.addr, reason)
			}
			r.mu.Lock()
			t := c.rooms[h.Room]
			r.mu.Unlock()
			if t != nil {
				r.fail(t, fmt.Errorf("%w: room %d: prefill: %s", ErrPeer, h.Room, reason), false)
			}
		default:
			return fmt.Errorf("%w: unexpected %s from prefill %s", ErrProtocol, h.Type, c.addr)
		}
	}
}

// onPages reads the payloads of a PAGES message straight into the room's destination
// pages, then verifies each frame's CRC. A bad frame fails its room only; frames of a room
// that is gone are read and dropped; a payload that cannot be read is a connection error.
func (r *Receiver) onPages(c *rconn, l *link, h Header, table []byte) error {
	es, err := ParseEntries(table, c.es, l.maxPage)
	c.es = es
	if err != nil {
		return err
	}
	dst := c.dst[:0]
	r.mu.Lock()
	t := c.rooms[h.Room]
	var bad error
	if t != nil {
		for _, e := range es {
			if bad = r.checkLocked(t, e); bad != nil {
				break
			}
		}
	}
	keep := t != nil && bad == nil
	if keep {
		t.reading = true // fail now waits for a write under way (pageGuard)
		c.guard.gone = &t.gone
		for _, e := range es {
			dst = append(dst, r.store.LayerBytes(t.dest[e.Page], int(e.Layer))[:e.Len])
		}
	} else {
		c.guard.gone = nil
		for _, e := range es {
			dst = append(dst, c.guard.discard(int(e.Len)))
		}
	}
	r.mu.Unlock()
	if bad != nil {
		r.fail(t, bad, true)
	}
	c.dst = dst
	c.rd = append(c.rd[:0], dst...) // readPayloads consumes its slices
	rerr := l.readPayloads(c.rd, &c.guard)
	if !keep {
		return rerr
	}
	var sum error
	var n int64
	// Under the guard: the pages are the room's only while it is not gone.
	c.guard.mu.Lock()
	for i, e := range es {
		if rerr != nil || t.gone.Load() {
			break
		}
		if got := Checksum(dst[i]); got != e.CRC {
			sum = fmt.Errorf("%w: room %d layer %d page %d (crc32c %#08x, computed %#08x)", ErrChecksum, t.room, e.Layer, e.Page, e.CRC, got)
			break
		}
		n += int64(e.Len)
	}
	c.guard.mu.Unlock()
	r.mu.Lock()
	t.reading = false
	if t.live && rerr == nil && sum == nil {
		t.received += len(es)
		t.bytes += n
		t.acked = true // a frame implies the registration was seen
		t.progressLocked(r.cfg.progressTimeout, StepNextFrame)
	}
	r.mu.Unlock()
	if rerr != nil {
		return rerr
	}
	if sum != nil {
		r.fail(t, sum, true)
	}
	return nil
}

// checkLocked validates one frame of t and claims its slot.
func (r *Receiver) checkLocked(t *Transfer, e Entry) error {
	ps := r.store.PageSize
	switch {
	case e.Layer >= uint32(r.store.Layers) || e.Page >= uint32(len(t.dest)):
		return fmt.Errorf("%w: room %d: frame layer %d page %d out of range", ErrProtocol, t.room, e.Layer, e.Page)
	case int(e.Len) != min(ps, t.numTokens-int(e.Page)*ps)*r.store.BytesPerToken:
		return fmt.Errorf("%w: room %d: frame layer %d page %d has %d bytes", ErrProtocol, t.room, e.Layer, e.Page, e.Len)
	}
	idx := int(e.Page)*r.store.Layers + int(e.Layer)
	if t.got[idx] {
		return fmt.Errorf("%w: room %d: duplicate frame layer %d page %d", ErrProtocol, t.room, e.Layer, e.Page)
	}
	t.got[idx] = true
	return nil
}

// onDone completes a room whose frames all arrived, and ACKs it.
func (r *Receiver) onDone(c *rconn, room uint64, d Done) {
	r.mu.Lock()
	t := c.rooms[room]
	if t == nil {
		r.mu.Unlock()
		return
	}
	if t.received != t.expected || int(d.Frames) != t.expected || int(d.NumTokens) != t.numTokens {
		r.mu.Unlock()
		r.fail(t, fmt.Errorf("%w: room %d: DONE after %d of %d frames (prefill sent %d, %d tokens, expected %d)",
			ErrProtocol, room, t.received, t.expected, d.Frames, d.NumTokens, t.numTokens), true)
		return
	}
	r.endLocked(t)
	c.l.Enqueue(MsgAck, room, nil)
	r.mu.Unlock()
	r.cfg.logger.Debug("kvtransfer: transfer done", "room", room, "bytes", t.bytes, "frames", t.received)
	t.deliver(Result{FirstToken: int(d.FirstToken)})
}

// Close closes every connection, fails every transfer and waits for the receiver's
// goroutines.
func (r *Receiver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	var links []*link
	for _, c := range r.conns {
		if c.l != nil {
			links = append(links, c.l)
		}
	}
	r.mu.Unlock()
	r.cancel()
	for _, l := range links {
		l.kill(ErrClosed)
	}
	r.wg.Wait()
	return nil
}
