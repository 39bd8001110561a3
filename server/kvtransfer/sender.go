package kvtransfer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"pdsoak/kernels"
)

// Sender is the prefill side: it listens for decode connections, learns rooms from
// REGISTER messages, and sends a room's KV pages when the engine calls Send.
type Sender struct {
	cfg   config
	store *kernels.KVStore
	shape Shape

	ctx    context.Context // ends at Close; bounds hook sleeps
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	ln     net.Listener
	links  map[*link]struct{}
	rooms  *SendRooms // the room protocol (rooms_send.go)
	closed bool
}

// sroom is one room on the sender: the machine's state and the channels a Send waits on.
type sroom struct {
	SendRoom
	ready chan struct{} // closed once registered

	fin    chan struct{} // closed by finish
	finCtx context.Context
	cancel context.CancelFunc // cancels finCtx at finish
	once   sync.Once
	err    error // nil: ACK received
}

// own is the sroom of a machine room.
func own(r *SendRoom) *sroom { return r.Owner.(*sroom) }

func (r *sroom) finish(err error) {
	r.once.Do(func() { r.err = err; close(r.fin); r.cancel() })
}

// endedEarly is why a room that ended before its DONE was written fails its Send: its
// error, or, for decode's ACK (nil), a protocol error: not every frame was sent, and a
// Send that returns nil leaves its pending frames on the link, pointing at the pages.
func (r *sroom) endedEarly() error {
	if r.err != nil {
		return r.err
	}
	return fmt.Errorf("%w: room %d: ACK from decode before DONE", ErrProtocol, r.Room)
}

// NewSender returns a sender that reads pages from store. Call Listen to accept decode
// connections.
func NewSender(store *kernels.KVStore, opts ...Option) *Sender {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := newConfig(opts)
	s := &Sender{
		cfg: cfg, store: store, ctx: ctx, cancel: cancel,
		shape: Shape{uint32(store.PageSize), uint32(store.Layers), uint32(store.BytesPerToken)},
		links: map[*link]struct{}{}, rooms: NewSendRooms(store.PageSize, cfg.tombstones, newSroom),
	}
	s.rooms.AckBound(nil, cfg.ackTimeout, s.ackExpired)
	return s
}

// ackExpired is a room's ACK timer (SendRooms.AckExpired decides); its Send ends.
func (s *Sender) ackExpired(r *SendRoom, step uint64) {
	s.mu.Lock()
	err := s.rooms.AckExpired(r, step)
	s.mu.Unlock()
	if err != nil {
		own(r).finish(err)
	}
}

// Listen binds addr (e.g. "127.0.0.1:0") and starts accepting decode connections.
func (s *Sender) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kvtransfer: listen %s: %w", addr, err)
	}
	s.mu.Lock()
	if s.closed || s.ln != nil {
		s.mu.Unlock()
		_ = ln.Close()
		return fmt.Errorf("kvtransfer: listen %s: sender closed or already listening: %w", addr, ErrClosed)
	}
	s.ln = ln
	s.mu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop(ln)
	return nil
}

// Addr is the bound listen address ("" before Listen).
func (s *Sender) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Registered reports what decode registered for room, if it has.
func (s *Sender) Registered(room uint64) (Registration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms.Get(room)
	if r == nil || r.Conn == nil {
		return Registration{}, false
	}
	return r.Reg, true
}

func (s *Sender) acceptLoop(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve runs one decode connection: handshake, then the read loop.
func (s *Sender) serve(c net.Conn) {
	defer s.wg.Done()
	l := newLink(c, &s.cfg)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.kill(ErrClosed)
		return
	}
	s.links[l] = struct{}{}
	s.mu.Unlock()
	if err := s.handshake(l); err != nil {
		if de := l.err(); de != nil {
			err = de
		}
		if !errors.Is(err, ErrClosed) {
			s.cfg.logger.Warn("kvtransfer: handshake failed", "peer", l.peer, "err", err)
		}
		l.kill(err)
		s.dropLink(l, err)
		return
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); l.writeLoop() }()

	err := s.readLoop(l)
	if de := l.err(); de != nil {
		err = de
	}
	l.kill(err)
	s.dropLink(l, err)
}

func (s *Sender) handshake(l *link) error {
	_ = l.c.SetReadDeadline(time.Now().Add(s.cfg.handshakeTimeout))
	h, body, _, err := ReadMessage(l.br, nil)
	if err != nil {
		return fmt.Errorf("kvtransfer: hello from %s: %w", l.peer, err)
	}
	if h.Type != MsgHello {
		return fmt.Errorf("%w: expected HELLO from %s, got %s", ErrProtocol, l.peer, h.Type)
	}
	shape, err := ParseShape(body)
	if err != nil {
		return err
	}
	if shape != s.shape {
		err := fmt.Errorf("%w: decode has %s, prefill has %s", ErrShape, shape, s.shape)
		// Answer with our shape so that decode reports the mismatch, then hang up.
		_ = l.write(appendMessage(nil, MsgHelloAck, 0, AppendShape(nil, s.shape)))
		return err
	}
	return l.write(appendMessage(nil, MsgHelloAck, 0, AppendShape(nil, s.shape)))
}

func (s *Sender) readLoop(l *link) error {
	var buf []byte
	for {
		h, body, nbuf, err := l.read(buf)
		buf = nbuf
		if err != nil {
			return err
		}
		if h.Type == MsgRegister {
			if err := s.onRegister(l, h.Room, body); err != nil {
				return err
			}
			continue
		}
		s.mu.Lock()
		ev, err := s.rooms.Handle(l, h, body, l.peer)
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if ev.Room != nil {
			s.ended(ev)
		}
	}
}

// onRegister handles REGISTER (SendRooms.OnRegister decides). A bad or refused room
// gets FAIL; only transport-level faults return an error (which closes the connection).
func (s *Sender) onRegister(l *link, room uint64, body []byte) error {
	arg, herr := s.cfg.eval(s.ctx, HookBootstrap)
	s.mu.Lock()
	ev, err := s.rooms.OnRegister(l, room, body, l.peer, arg, herr)
	if ev.Room != nil {
		close(own(ev.Room).ready)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if ev.Failed != nil {
		own(ev.Failed).finish(ev.FailErr) // a Send waiting for this room fails now
	}
	if ev.Room == nil {
		s.cfg.logger.Warn("kvtransfer: register refused", "room", room, "peer", l.peer, "reason", ev.Refused)
		return nil
	}
	r := ev.Room
	s.cfg.logger.Debug("kvtransfer: room registered", "room", room, "tokens", r.Reg.NumTokens, "pages", len(r.Reg.DestPages), "peer", l.peer)
	if s.cfg.onRegister != nil {
		s.cfg.onRegister(r.Reg)
	}
	return nil
}

func newSroom(room uint64) *SendRoom {
	ctx, cancel := context.WithCancel(context.Background())
	r := &sroom{ready: make(chan struct{}), fin: make(chan struct{}), finCtx: ctx, cancel: cancel}
	r.Room, r.Owner = room, r
	return &r.SendRoom
}

// ended carries out a room's end decided by the machine: its Send returns ev.Err, or the
// engine learns the room was abandoned.
func (s *Sender) ended(ev SendEvent) {
	own(ev.Room).finish(ev.Err)
	if ev.Err != nil {
		s.cfg.logger.Warn("kvtransfer: decode failed room", "room", ev.Room.Room, "err", ev.Err)
	}
	if ev.Abandoned != "" && s.cfg.onAbort != nil {
		s.cfg.onAbort(ev.Room.Room, ev.Abandoned)
	}
}

// dropLink fails every room of a dead connection.
func (s *Sender) dropLink(l *link, err error) {
	s.mu.Lock()
	delete(s.links, l)
	lost := s.rooms.ConnLost(l, err, nil)
	s.mu.Unlock()
	for _, r := range lost {
		own(r).finish(LostError(r.Room, err))
	}
	if len(lost) > 0 || !errors.Is(err, ErrClosed) {
		s.cfg.logger.Warn("kvtransfer: decode connection lost", "peer", l.peer, "rooms", len(lost), "err", err)
	}
	if s.cfg.onAbort != nil {
		for _, r := range lost {
			if !r.Sending {
				s.cfg.onAbort(r.Room, err.Error())
			}
		}
	}
}

// Send sends the KV of numTokens tokens held in srcPages to the room's destination pages,
// then DONE with firstToken, and returns when decode acknowledged (nil) or the room failed.
// It waits for decode's REGISTER if it has not arrived yet (bounded by ctx). The source
// pages are only read before Send returns. Errors wrap gen.ErrTransfer (or ctx's error).
func (s *Sender) Send(ctx context.Context, room uint64, srcPages []int32, numTokens int, firstToken int) error {
	start := time.Now()
	s.mu.Lock()
	var mr *SendRoom
	err := ErrClosed
	if !s.closed {
		mr, err = s.rooms.Claim(room)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	r := own(mr)
	var bytes int64
	frames := 0
	err = s.send(ctx, r, srcPages, numTokens, firstToken, &bytes, &frames)
	r.cancel()
	s.mu.Lock()
	s.rooms.Ended(mr, err)
	s.mu.Unlock()
	if err != nil {
		s.cfg.logger.Warn("kvtransfer: send failed", "room", room, "err", err)
	}
	if s.cfg.onComplete != nil {
		s.cfg.onComplete(Stats{Room: room, Bytes: bytes, Frames: frames, Duration: time.Since(start), Err: err})
	}
	return err
}

func (s *Sender) send(ctx context.Context, r *sroom, src []int32, numTokens, firstToken int, bytes *int64, frames *int) (err error) {
	select {
	case <-r.ready:
	case <-r.fin:
		return r.endedEarly()
	case <-ctx.Done():
		return fmt.Errorf("kvtransfer: room %d: waiting for decode to register: %w", r.Room, context.Cause(ctx))
	case <-s.ctx.Done():
		return ErrClosed
	}
	s.mu.Lock()
	l := r.Conn.(*link)
	err = s.rooms.Check(&r.SendRoom, src, numTokens, firstToken, s.store.NumPages)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			l.forget(r.Room) // frames still pending point at pages the caller gets back
		}
	}()
	fail := func(err error) error {
		l.Enqueue(MsgFail, r.Room, []byte(clipReason(err.Error())))
		return err
	}
	// A hook that sleeps or pauses (a stall fault) ends when the room does, e.g. when
	// decode gives up on it, so prefill frees the request without waiting for the fault.
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	defer context.AfterFunc(r.finCtx, hcancel)()
	fsrc := newFrameSource(s.store, src, numTokens)
	defer fsrc.close()
	for i := range NumFrames(s.store.PageSize, s.store.Layers, numTokens) {
		select {
		case <-r.fin:
			return r.endedEarly()
		case <-ctx.Done():
			return fail(fmt.Errorf("kvtransfer: room %d: send: %w", r.Room, context.Cause(ctx)))
		default:
		}
		e, payload := fsrc.frame(i)
		arg, err := s.cfg.eval(hctx, HookSendFrame)
		if err != nil {
			select {
			case <-r.fin:
				return r.endedEarly()
			default:
			}
			return fail(fmt.Errorf("%w: room %d: hook %s: %w", ErrConnection, r.Room, HookSendFrame, err))
		}
		if arg == HookDrop {
			err := HookDropError(HookSendFrame, r.Room)
			l.kill(err)
			return err
		}
		if err := l.writeFrame(r.Room, e, payload, arg == HookCorrupt); err != nil {
			return fmt.Errorf("room %d: %w", r.Room, err)
		}
		*bytes += int64(e.Len)
		*frames++
	}
	done := AppendDone(nil, Done{FirstToken: int32(firstToken), NumTokens: uint32(numTokens), Frames: uint32(*frames)})
	if err := l.write(appendMessage(nil, MsgDone, r.Room, done)); err != nil {
		err = fmt.Errorf("%w: room %d: write DONE: %w", ErrConnection, r.Room, err)
		l.kill(err)
		return err
	}
	s.mu.Lock()
	s.rooms.AwaitAck(&r.SendRoom) // its timer ends the room (ackExpired)
	s.mu.Unlock()
	select {
	case <-r.fin:
		return r.err
	case <-ctx.Done():
		return fail(fmt.Errorf("kvtransfer: room %d: waiting for ACK: %w", r.Room, context.Cause(ctx)))
	case <-s.ctx.Done():
		return ErrClosed
	}
}

// Fail fails a room from the prefill side (the request failed or was aborted): decode is
// told with FAIL, a Send in progress for it returns an error, and a REGISTER that arrives
// later is refused. It never blocks on the network.
func (s *Sender) Fail(room uint64, reason string) {
	s.mu.Lock()
	r, err := s.rooms.Fail(room, reason)
	s.mu.Unlock()
	if r != nil {
		own(r).finish(err)
	}
}

// Close stops listening, closes every connection, fails every room, and waits for the
// sender's goroutines.
func (s *Sender) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ln := s.ln
	links := make([]*link, 0, len(s.links))
	for l := range s.links {
		links = append(links, l)
	}
	rooms := s.rooms.All()
	s.mu.Unlock()
	s.cancel()
	if ln != nil {
		_ = ln.Close()
	}
	for _, l := range links {
		l.kill(ErrClosed)
	}
	for _, r := range rooms {
		own(r).finish(ErrClosed)
	}
	s.wg.Wait()
	return nil
}
