package kvtransfer

import (
	"fmt"
	"slices"
	"time"

	"pdsoak/server/gen"
)

// Clock is the time the receiver's room machine reads and the timers it arms: the wall
// clock on the Receiver, the simulator's virtual clock in sim.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is an armed timer of a Clock.
type Timer interface{ Stop() bool }

type wallClock struct{}

func (wallClock) Now() time.Time                            { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// RecvRooms is the receiver's room protocol as a state machine: the prefill endpoints
// (one connection each, kept once dead with WithStaleEndpoints), the rooms registered on
// them, the bound of each room's step (REGISTER_ACK, first frame, next frame), frame
// accounting, DONE/ACK and FAIL. Control messages leave through Conn; the driver
// (Receiver on sockets, the simulator on its virtual link) dials, reads the bytes into
// the pages and tells the engine. Not safe for concurrent use: the Receiver calls it
// under its mutex, the simulator from its one goroutine.
type RecvRooms struct {
	clock Clock
	cfg   RecvConfig
	rooms map[uint64]*RecvRoom
	eps   map[string]*Endpoint
	// onTimer runs when a room's step timer fires (armed for step); the driver calls
	// Expire under its lock.
	onTimer func(r *RecvRoom, step uint64)
}

// RecvConfig is what the receiver's rules depend on.
type RecvConfig struct {
	PageSize, Layers, BytesPerToken, NumPages int
	// Handshake bounds REGISTER→REGISTER_ACK, Waiting the first frame (0: the engine's),
	// Progress the gap between frames (0: unbounded).
	Handshake, Waiting, Progress time.Duration
	// StaleEndpoints keeps a dead connection cached (sgl-project/sglang#33789).
	StaleEndpoints bool
}

// Endpoint is one prefill bootstrap address and the connection to it. Drivers read its
// fields and set only Owner.
type Endpoint struct {
	Addr  string
	Conn  Conn // nil while dialing
	rooms map[uint64]*RecvRoom
	Owner any // the driver's state
}

// RecvRoom is one room on the receiver. Drivers read its fields and set only Owner.
type RecvRoom struct {
	Room      uint64
	Dest      []int32
	NumTokens int
	EP        *Endpoint
	Live      bool
	Received  int   // frames verified
	Bytes     int64 // payload bytes verified
	Owner     any   // the driver's state

	acked    bool
	got      []bool // [page index * layers + layer]
	expected int
	timer    Timer
	step     uint64 // counts arm calls: a timer of an earlier step does nothing
	stepWhat string
	stepD    time.Duration
	stepAt   time.Time // when the current step (re)started
}

// NewRecvRooms returns the machine; clock nil is the wall clock.
func NewRecvRooms(clock Clock, cfg RecvConfig, onTimer func(r *RecvRoom, step uint64)) *RecvRooms {
	if clock == nil {
		clock = wallClock{}
	}
	return &RecvRooms{clock: clock, cfg: cfg, rooms: map[uint64]*RecvRoom{}, eps: map[string]*Endpoint{}, onTimer: onTimer}
}

// Start adds the room r (room, its destination pages and token count) on the endpoint
// for addr, made with newEP when there is none (dial is then true: the driver dials and
// calls Connected or Lost). Once the endpoint is connected the room is REGISTERed.
func (m *RecvRooms) Start(r *RecvRoom, addr string, room uint64, dest []int32, numTokens int, newEP func() *Endpoint) (ep *Endpoint, dial bool, err error) {
	if room == 0 {
		return nil, false, fmt.Errorf("kvtransfer: room 0 is reserved: %w", gen.ErrInvalid)
	}
	ps := m.cfg.PageSize
	need := (numTokens + ps - 1) / ps
	if numTokens <= 0 || len(dest) < need || numTokens > 1<<31-1 {
		return nil, false, fmt.Errorf("%w: %d destination pages for %d tokens", ErrShape, len(dest), numTokens)
	}
	for _, p := range dest[:need] {
		if p < 0 || int(p) >= m.cfg.NumPages {
			return nil, false, fmt.Errorf("%w: destination page %d out of range", ErrShape, p)
		}
	}
	if _, ok := m.rooms[room]; ok {
		return nil, false, fmt.Errorf("%w: room %d", ErrDuplicate, room)
	}
	r.Room, r.Dest, r.NumTokens, r.Live = room, append([]int32(nil), dest[:need]...), numTokens, true
	r.expected = need * m.cfg.Layers
	r.got = make([]bool, r.expected)
	ep = m.eps[addr]
	if ep == nil {
		ep, dial = newEP(), true
		ep.Addr, ep.rooms = addr, map[uint64]*RecvRoom{}
		m.eps[addr] = ep
	}
	m.rooms[room] = r
	ep.rooms[room] = r
	r.EP = ep
	if ep.Conn != nil {
		m.register(r)
	}
	return ep, dial, nil
}

// Connected: the endpoint's dial and handshake succeeded on c; its rooms are registered.
func (m *RecvRooms) Connected(ep *Endpoint, c Conn) {
	ep.Conn = c
	for _, r := range sortedRooms(ep.rooms) {
		m.register(r)
	}
}

func (m *RecvRooms) register(r *RecvRoom) {
	r.EP.Conn.Enqueue(MsgRegister, r.Room, AppendRegister(nil, Register{NumTokens: uint32(r.NumTokens), Pages: r.Dest}))
	m.arm(r, m.cfg.Handshake, StepRegisterAck)
}

// Lost: the endpoint's connection (or its dial) failed. It is forgotten, except a
// connection that once worked under StaleEndpoints; its rooms are returned in order, for
// the driver to End without FAIL (LostRoomError).
func (m *RecvRooms) Lost(ep *Endpoint) []*RecvRoom {
	if m.eps[ep.Addr] == ep && (!m.cfg.StaleEndpoints || ep.Conn == nil) {
		delete(m.eps, ep.Addr)
	}
	return sortedRooms(ep.rooms)
}

// LostRoomError is how a room ends when its connection to prefill addr died with err.
func LostRoomError(room uint64, addr string, err error) error {
	return fmt.Errorf("room %d: prefill %s: %w", room, addr, err)
}

// Get is the live room (nil when gone).
func (m *RecvRooms) Get(room uint64) *RecvRoom { return m.rooms[room] }

// Lookup is the live room on ep (nil when gone).
func (m *RecvRooms) Lookup(ep *Endpoint, room uint64) *RecvRoom { return ep.rooms[room] }

// RegisterAck: prefill knows the room; the wait for its first frame starts (bounded by
// the waiting timeout, the engine's bound when 0).
func (m *RecvRooms) RegisterAck(ep *Endpoint, room uint64) {
	if r := ep.rooms[room]; r != nil && !r.acked {
		r.acked = true
		m.arm(r, m.cfg.Waiting, StepFirstFrame)
	}
}

// CheckFrame validates one frame of r (its page, layer and length) and claims its slot.
func (m *RecvRooms) CheckFrame(r *RecvRoom, e Entry) error {
	ps, layers := m.cfg.PageSize, m.cfg.Layers
	switch {
	case e.Layer >= uint32(layers) || e.Page >= uint32(len(r.Dest)):
		return fmt.Errorf("%w: room %d: frame layer %d page %d out of range", ErrProtocol, r.Room, e.Layer, e.Page)
	case int(e.Len) != FrameLen(ps, m.cfg.BytesPerToken, r.NumTokens, int(e.Page)):
		return fmt.Errorf("%w: room %d: frame layer %d page %d has %d bytes", ErrProtocol, r.Room, e.Layer, e.Page, e.Len)
	}
	idx := int(e.Page)*layers + int(e.Layer)
	if r.got[idx] {
		return fmt.Errorf("%w: room %d: duplicate frame layer %d page %d", ErrProtocol, r.Room, e.Layer, e.Page)
	}
	r.got[idx] = true
	return nil
}

// FrameLen is the payload of page j's frames in a room of numTokens tokens: its first
// min(pageSize, what is left) tokens of one layer.
func FrameLen(pageSize, bytesPerToken, numTokens, j int) int {
	return min(pageSize, numTokens-j*pageSize) * bytesPerToken
}

// ChecksumError is how a frame whose payload does not match its CRC fails its room.
func ChecksumError(room uint64, e Entry, got uint32) error {
	return fmt.Errorf("%w: room %d layer %d page %d (crc32c %#08x, computed %#08x)", ErrChecksum, room, e.Layer, e.Page, e.CRC, got)
}

// Progress records frames verified frames of bytes payload bytes, which restarts the
// room's next-frame bound. Re-arming a timer per message costs more than the message's
// bookkeeping, so only the time is recorded; a timer that fires early re-arms itself for
// the rest (Expire).
func (m *RecvRooms) Progress(r *RecvRoom, frames int, bytes int64) {
	if !r.Live {
		return
	}
	r.Received += frames
	r.Bytes += bytes
	r.acked = true // a frame implies the registration was seen
	if r.timer == nil || r.stepWhat != StepNextFrame {
		m.arm(r, m.cfg.Progress, StepNextFrame)
		return
	}
	r.stepAt = m.clock.Now()
}

// Done is prefill's DONE for room on ep: with every frame there the room ends and is
// ACKed (err nil); otherwise err is the protocol error to End it with (FAIL). r is nil
// when the room is gone.
func (m *RecvRooms) Done(ep *Endpoint, room uint64, d Done) (r *RecvRoom, err error) {
	r = ep.rooms[room]
	if r == nil {
		return nil, nil
	}
	if r.Received != r.expected || int(d.Frames) != r.expected || int(d.NumTokens) != r.NumTokens {
		return r, fmt.Errorf("%w: room %d: DONE after %d of %d frames (prefill sent %d, %d tokens, expected %d)",
			ErrProtocol, room, r.Received, r.expected, d.Frames, d.NumTokens, r.NumTokens)
	}
	m.End(r, nil, false)
	ep.Conn.Enqueue(MsgAck, room, nil)
	return r, nil
}

// RecvEvent is a room that a control message from prefill ended, for the driver to
// report: failed with Err, or complete (Err nil, ACKed) with prefill's FirstToken.
type RecvEvent struct {
	Room       *RecvRoom
	Err        error
	FirstToken int
}

// Handle is a control message from prefill on ep, other than PAGES (whose payloads the
// driver reads into the pages: CheckFrame, Progress). A malformed message, an unexpected
// type or FAIL for room 0 is an error: the connection closes.
func (m *RecvRooms) Handle(ep *Endpoint, h Header, body []byte) (RecvEvent, error) {
	switch h.Type {
	case MsgHeartbeat:
	case MsgRegisterAck:
		m.RegisterAck(ep, h.Room)
	case MsgDone:
		d, err := ParseDone(body)
		if err != nil {
			return RecvEvent{}, err
		}
		r, err := m.Done(ep, h.Room, d)
		if err != nil {
			m.End(r, err, true)
		}
		return RecvEvent{Room: r, Err: err, FirstToken: int(d.FirstToken)}, nil
	case MsgFail:
		reason, err := ParseFail(body)
		if err != nil {
			return RecvEvent{}, err
		}
		if h.Room == 0 {
			return RecvEvent{}, fmt.Errorf("%w: prefill %s closed the connection: %s", ErrPeer, ep.Addr, reason)
		}
		r, err := m.PeerFailed(ep, h.Room, reason)
		if r != nil {
			m.End(r, err, false)
		}
		return RecvEvent{Room: r, Err: err}, nil
	default:
		return RecvEvent{}, fmt.Errorf("%w: unexpected %s from prefill %s", ErrProtocol, h.Type, ep.Addr)
	}
	return RecvEvent{}, nil
}

// PeerFailed is prefill's FAIL for room: the error to End it with (no FAIL back).
func (m *RecvRooms) PeerFailed(ep *Endpoint, room uint64, reason string) (*RecvRoom, error) {
	r := ep.rooms[room]
	if r == nil {
		return nil, nil
	}
	return r, fmt.Errorf("%w: room %d: prefill: %s", ErrPeer, room, reason)
}

// CancelError is how decode abandons a room (Transfer.Cancel).
func CancelError(room uint64, reason string) error {
	return fmt.Errorf("kvtransfer: room %d cancelled by decode: %s: %w", room, reason, gen.ErrTransfer)
}

// End ends a live room (false: it ended already); with notify, prefill is told with
// FAIL (err's text).
func (m *RecvRooms) End(r *RecvRoom, err error, notify bool) bool {
	if !r.Live {
		return false
	}
	r.Live = false
	if r.timer != nil {
		r.timer.Stop()
	}
	delete(m.rooms, r.Room)
	delete(r.EP.rooms, r.Room)
	if notify && r.EP.Conn != nil {
		r.EP.Conn.Enqueue(MsgFail, r.Room, []byte(clipReason(err.Error())))
	}
	return true
}

// arm (re)starts the room's step: it must be over within d (d ≤ 0: unbounded).
func (m *RecvRooms) arm(r *RecvRoom, d time.Duration, what string) {
	r.step++
	r.stepWhat, r.stepD, r.stepAt = what, d, m.clock.Now()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if d <= 0 {
		return
	}
	step := r.step
	r.timer = m.clock.AfterFunc(d, func() { m.onTimer(r, step) })
}

// Expire is a step timer that fired: the error to End the room with (and FAIL), or nil
// when the step changed or, for a step that repeats, restarted less than its bound ago
// (the timer is re-armed for the rest).
func (m *RecvRooms) Expire(r *RecvRoom, step uint64) error {
	if !r.Live || r.step != step {
		return nil
	}
	if rest := r.stepD - m.clock.Now().Sub(r.stepAt); rest > 0 {
		r.timer = m.clock.AfterFunc(rest, func() { m.onTimer(r, step) })
		return nil
	}
	return StepTimeoutError(r.Room, r.stepWhat, r.stepD)
}

func sortedRooms(rooms map[uint64]*RecvRoom) []*RecvRoom {
	out := make([]*RecvRoom, 0, len(rooms))
	for _, r := range rooms {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *RecvRoom) int { return cmpRoom(a.Room, b.Room) })
	return out
}
