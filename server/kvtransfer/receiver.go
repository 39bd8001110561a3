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
	rooms  *RecvRooms // the room protocol (rooms_recv.go)
	links  map[*link]struct{}
	closed bool
}

// rconn is the receiver's connection to one prefill address.
type rconn struct {
	ep Endpoint
	l  *link // nil while dialing

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
	r     *Receiver
	room  uint64
	start time.Time

	// Under r.mu:
	rr      RecvRoom
	conn    *rconn
	reading bool        // the connection's reader is writing payloads into dest (onPages)
	gone    atomic.Bool // set by endLocked: the reader's writes go elsewhere (pageGuard)
	stopCtx func() bool

	done   chan Result
	notify func(Result) // StartFunc's callback, nil for Start
	once   sync.Once
	result Result
}

// Room is the transfer's bootstrap room.
func (t *Transfer) Room() uint64 { return t.room }

// Done yields the result once, then is closed; nil for a StartFunc transfer.
func (t *Transfer) Done() <-chan Result { return t.done }

// Cancel aborts the transfer (decode no longer wants it) and tells prefill with FAIL. No
// byte lands in the transfer's destination pages once Cancel returns.
func (t *Transfer) Cancel(reason string) {
	t.r.fail(t, CancelError(t.room, reason), true)
}

// NewReceiver returns a receiver that writes pages into store.
func NewReceiver(store *kernels.KVStore, opts ...Option) *Receiver {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Receiver{
		cfg: newConfig(opts), store: store, ctx: ctx, cancel: cancel,
		shape: Shape{uint32(store.PageSize), uint32(store.Layers), uint32(store.BytesPerToken)},
		links: map[*link]struct{}{},
	}
	r.rooms = NewRecvRooms(nil, RecvConfig{PageSize: store.PageSize, Layers: store.Layers, BytesPerToken: store.BytesPerToken,
		NumPages: store.NumPages, Handshake: r.cfg.handshakeTimeout, Waiting: r.cfg.waitingTimeout,
		Progress: r.cfg.progressTimeout, StaleEndpoints: r.cfg.staleEndpoints}, r.expire)
	return r
}

func tr(rr *RecvRoom) *Transfer { return rr.Owner.(*Transfer) }

// Start registers room with the prefill worker whose bootstrap address is prefillAddr:
// numTokens tokens of KV will land in destPages. It does not block on the network (the
// dial and handshake run in the background, so a slow prefill never stalls the caller);
// every outcome, including a failed dial, arrives on the Transfer's Done channel.
// Cancelling ctx cancels the transfer. Start fails at once only on bad arguments, a
// duplicate room or a closed receiver.
func (r *Receiver) Start(ctx context.Context, prefillAddr string, room uint64, destPages []int32, numTokens int) (*Transfer, error) {
	return r.start(ctx, prefillAddr, room, destPages, numTokens, nil)
}

func (r *Receiver) start(ctx context.Context, prefillAddr string, room uint64, destPages []int32, numTokens int, notify func(Result)) (*Transfer, error) {
	t := &Transfer{r: r, room: room, start: time.Now(), notify: notify}
	if notify == nil {
		t.done = make(chan Result, 1)
	}
	t.rr.Owner = t
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	ep, dial, err := r.rooms.Start(&t.rr, prefillAddr, room, destPages, numTokens, newRconn)
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	t.conn = ep.Owner.(*rconn)
	if dial {
		r.wg.Add(1)
		go r.run(t.conn)
	}
	// The callback runs on its own goroutine and takes r.mu, so it cannot see t half made.
	t.stopCtx = context.AfterFunc(ctx, func() {
		r.fail(t, fmt.Errorf("kvtransfer: room %d: %w: %w", room, gen.ErrTransfer, context.Cause(ctx)), true)
	})
	r.mu.Unlock()
	return t, nil
}

func newRconn() *Endpoint {
	c := &rconn{}
	c.ep.Owner = c
	return &c.ep
}

// expire is a room's step timer (RecvRooms.Expire decides).
func (r *Receiver) expire(rr *RecvRoom, step uint64) {
	r.mu.Lock()
	err := r.rooms.Expire(rr, step)
	r.mu.Unlock()
	if err != nil {
		r.fail(tr(rr), err, true)
	}
}

// fail ends a live transfer with err; with notify, prefill is told with FAIL.
func (r *Receiver) fail(t *Transfer, err error, notify bool) {
	r.mu.Lock()
	if !r.endLocked(t, err, notify) {
		r.mu.Unlock()
		return
	}
	reading := t.reading
	r.mu.Unlock()
	if reading {
		t.conn.guard.barrier() // the write into t's pages in progress, if any, is over
	}
	r.report(t, err, -1)
}

// report delivers how t ended (its machine room ended already): err, or complete.
func (r *Receiver) report(t *Transfer, err error, firstToken int) {
	if err != nil {
		r.cfg.logger.Warn("kvtransfer: transfer failed", "room", t.room, "prefill", t.conn.ep.Addr, "err", err)
		t.deliver(Result{Err: err})
		return
	}
	r.cfg.logger.Debug("kvtransfer: transfer done", "room", t.room, "bytes", t.rr.Bytes, "frames", t.rr.Received)
	t.deliver(Result{FirstToken: firstToken})
}

// endLocked removes t. No frame is written into its pages after this returns, except
// by a write of the reader already under way, which fail waits for (pageGuard).
func (r *Receiver) endLocked(t *Transfer, err error, notify bool) bool {
	if !r.rooms.End(&t.rr, err, notify) {
		return false
	}
	t.gone.Store(true)
	return true
}

func (t *Transfer) deliver(res Result) {
	t.once.Do(func() {
		if t.stopCtx != nil {
			t.stopCtx()
		}
		t.result = res
		if t.notify != nil {
			t.notify(res)
		} else {
			t.done <- res
			close(t.done)
		}
		if cb := t.r.cfg.onComplete; cb != nil {
			cb(Stats{Room: t.room, Bytes: t.rr.Bytes, Frames: t.rr.Received, Duration: time.Since(t.start), Err: res.Err})
		}
	})
}

// run dials prefill, shakes hands, registers the waiting rooms and reads until the
// connection dies; then every room on it fails.
func (r *Receiver) run(c *rconn) {
	defer r.wg.Done()
	l, err := r.dial(c.ep.Addr)
	if err == nil {
		r.mu.Lock()
		if r.closed {
			err = ErrClosed
		} else {
			c.l = l
			r.links[l] = struct{}{}
			r.rooms.Connected(&c.ep, l)
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
	delete(r.links, l)
	rooms := r.rooms.Lost(&c.ep)
	r.mu.Unlock()
	for _, rr := range rooms {
		r.fail(tr(rr), LostRoomError(rr.Room, c.ep.Addr, err), false)
	}
}

func (r *Receiver) dial(addr string) (*link, error) {
	d := net.Dialer{Timeout: r.cfg.dialTimeout}
	conn, err := d.DialContext(r.ctx, "tcp", addr)
	if err != nil {
		if r.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, DialError(addr, err)
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
		if h.Type == MsgPages {
			if err := r.onPages(c, l, h, body); err != nil {
				return err
			}
			continue
		}
		// Waiting for prefill's forward pass (after REGISTER_ACK) is the engine's bound,
		// or (sglang semantics) SGLANG_DISAGGREGATION_WAITING_TIMEOUT's: WithWaitingTimeout.
		r.mu.Lock()
		ev, err := r.rooms.Handle(&c.ep, h, body)
		if ev.Room != nil {
			tr(ev.Room).gone.Store(true) // this reader is not in onPages: nothing to wait for
		}
		r.mu.Unlock()
		if err != nil {
			return err
		}
		if ev.Room != nil {
			r.report(tr(ev.Room), ev.Err, ev.FirstToken)
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
	var t *Transfer
	rr, dst, bad := r.rooms.Pages(&c.ep, h.Room, es, r.store, dst)
	if rr != nil {
		t = tr(rr)
	}
	keep := t != nil && bad == nil
	if keep {
		t.reading = true // fail now waits for a write under way (pageGuard)
		c.guard.gone = &t.gone
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
	if rerr == nil {
		n, sum = VerifyPages(t.room, es, dst, &t.gone)
	}
	c.guard.mu.Unlock()
	r.mu.Lock()
	t.reading = false
	if rerr == nil && sum == nil {
		r.rooms.Progress(&t.rr, len(es), n)
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

// Close closes every connection, fails every transfer and waits for the receiver's
// goroutines.
func (r *Receiver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	links := make([]*link, 0, len(r.links))
	for l := range r.links {
		links = append(links, l)
	}
	r.mu.Unlock()
	r.cancel()
	for _, l := range links {
		l.kill(ErrClosed)
	}
	r.wg.Wait()
	return nil
}
