package kvtransfer

import (
	"fmt"
	"slices"
	"time"
)

// SendRooms is the sender's room protocol as a state machine: which rooms decode
// registered and on which connection, which a Send carries, and which failed
// (Tombstones, the bounded ring). It decides and sends control messages through Conn;
// the driver (Sender on sockets, the simulator on its virtual link) owns the goroutines,
// the page frames and telling the engine. Not safe for concurrent use: the Sender calls
// it under its mutex, the simulator from its one goroutine.
type SendRooms struct {
	rooms    map[uint64]*SendRoom
	tomb     *Tombstones
	pageSize int
	newRoom  func(room uint64) *SendRoom

	// The ACK bound (AckBound): after DONE, decode must ACK within ack.
	clock Clock
	ack   time.Duration
	onAck func(r *SendRoom, step uint64)
}

// Conn is one connection as the room machines see it: where control messages go. It
// must not block (the Sender's link queues them for its writer goroutine).
type Conn interface {
	Enqueue(t MsgType, room uint64, body []byte)
}

// SendRoom is one room on the sender. Drivers read its fields and set only Owner.
type SendRoom struct {
	Room uint64
	Reg  Registration // valid once Conn is set
	// Conn is the connection decode registered the room on (nil until it has).
	Conn    Conn
	Sending bool // a Send carries the room (Claim)
	// Owner is the driver's own state for the room.
	Owner any

	ackTimer Timer  // armed by AwaitAck
	ackStep  uint64 // counts AwaitAck and Ended: a timer of an earlier one does nothing
}

// NewSendRooms remembers the last tombstones failed rooms; newRoom makes a room's
// driver state (nil: a bare SendRoom).
func NewSendRooms(pageSize, tombstones int, newRoom func(room uint64) *SendRoom) *SendRooms {
	if newRoom == nil {
		newRoom = func(room uint64) *SendRoom { return &SendRoom{Room: room} }
	}
	return &SendRooms{rooms: map[uint64]*SendRoom{}, tomb: NewTombstones(tombstones), pageSize: pageSize, newRoom: newRoom,
		clock: wallClock{}, ack: DefaultAckTimeout}
}

// AckBound sets the clock (nil: the wall clock) and the bound on decode's ACK after DONE
// (≤ 0: unbounded); onTimer runs when a room's ACK timer fires (armed for step), and the
// driver calls AckExpired under its lock.
func (m *SendRooms) AckBound(clock Clock, d time.Duration, onTimer func(r *SendRoom, step uint64)) {
	if clock == nil {
		clock = wallClock{}
	}
	m.clock, m.ack, m.onAck = clock, d, onTimer
}

// Get is the room's state (nil when unknown).
func (m *SendRooms) Get(room uint64) *SendRoom { return m.rooms[room] }

// Register handles decode's REGISTER on c: a room that cannot hold its tokens, that
// prefill already failed or that is registered already is refused with FAIL (r nil,
// refused the reason); otherwise it is recorded and answered with REGISTER_ACK.
func (m *SendRooms) Register(c Conn, room uint64, reg Register, peer string) (r *SendRoom, refused string) {
	need := (int(reg.NumTokens) + m.pageSize - 1) / m.pageSize
	switch reason, failed := m.tomb.Failed(room); {
	case len(reg.Pages) < need:
		refused = fmt.Sprintf("%d pages cannot hold %d tokens of page size %d", len(reg.Pages), reg.NumTokens, m.pageSize)
	case failed:
		refused = RefusedRegisterReason(reason)
	case m.rooms[room] != nil && m.rooms[room].Conn != nil:
		refused = ErrDuplicate.Error()
	}
	if refused != "" {
		m.Refuse(c, room, refused)
		return nil, refused
	}
	r = m.rooms[room]
	if r == nil {
		r = m.newRoom(room)
		m.rooms[room] = r
	}
	r.Reg = Registration{Room: room, NumTokens: int(reg.NumTokens), DestPages: reg.Pages, Peer: peer}
	r.Conn = c
	c.Enqueue(MsgRegisterAck, room, nil)
	return r, ""
}

// Refuse answers a REGISTER with FAIL.
func (m *SendRooms) Refuse(c Conn, room uint64, reason string) {
	c.Enqueue(MsgFail, room, []byte(clipReason(reason)))
}

// HookRefusedReason is the FAIL reason of a REGISTER the bootstrap hook refused.
func HookRefusedReason(herr error, arg string) string {
	return fmt.Sprintf("bootstrap refused by hook %s: %v %s", HookBootstrap, herr, arg)
}

// HookDropError is why a connection closes when a hook's "drop" fault fires at point
// (room 0: at a REGISTER, before the room is known).
func HookDropError(point string, room uint64) error {
	if room == 0 {
		return fmt.Errorf("%w: dropped by hook %s", ErrConnection, point)
	}
	return fmt.Errorf("%w: room %d: dropped by hook %s", ErrConnection, room, point)
}

// Acked is decode's ACK on c: the room's Send succeeded (nil when no such room on c).
func (m *SendRooms) Acked(c Conn, room uint64) *SendRoom {
	if r := m.rooms[room]; r != nil && r.Conn == c {
		return r
	}
	return nil
}

// SendEvent is a room that a control message from decode ended: its Send ends with Err
// (nil: ACKed); a room no Send carries was forgotten, and Abandoned is the reason the
// engine is told (AbandonedError).
type SendEvent struct {
	Room      *SendRoom
	Err       error
	Abandoned string
}

// Handle is a control message from decode (peer) on c, other than REGISTER (which the
// bootstrap hook sees first: Register). A malformed message, an unexpected type or FAIL
// for room 0 is an error: the connection closes.
func (m *SendRooms) Handle(c Conn, h Header, body []byte, peer string) (SendEvent, error) {
	switch h.Type {
	case MsgHeartbeat:
	case MsgAck:
		return SendEvent{Room: m.Acked(c, h.Room)}, nil
	case MsgFail:
		reason, err := ParseFail(body)
		if err != nil {
			return SendEvent{}, err
		}
		if h.Room == 0 {
			return SendEvent{}, fmt.Errorf("%w: decode %s closed the connection: %s", ErrPeer, peer, reason)
		}
		r, abandoned, err := m.PeerFailed(c, h.Room, reason)
		return SendEvent{Room: r, Err: err, Abandoned: abandoned}, nil
	default:
		return SendEvent{}, fmt.Errorf("%w: unexpected %s from decode %s", ErrProtocol, h.Type, peer)
	}
	return SendEvent{}, nil
}

// PeerFailed is decode's FAIL for room on c. The room's Send, if one carries it, ends
// with err; a room no Send carries yet is forgotten and tombstoned, and abandoned is the
// reason the engine is told (AbandonedError). r is nil when c has no such room.
func (m *SendRooms) PeerFailed(c Conn, room uint64, reason string) (r *SendRoom, abandoned string, err error) {
	r = m.rooms[room]
	if r == nil || r.Conn != c {
		return nil, "", nil
	}
	if !r.Sending {
		delete(m.rooms, room)
		abandoned = "decode: " + reason
		m.tomb.Add(room, abandoned)
	}
	return r, abandoned, fmt.Errorf("%w: room %d: decode: %s", ErrPeer, room, reason)
}

// ConnLost fails every room registered on c (dead with err), in room order, appended to
// lost: a Send carrying one ends with LostError; the others are forgotten and
// tombstoned (the engine is told AbandonedError(room, err.Error())).
func (m *SendRooms) ConnLost(c Conn, err error, lost []*SendRoom) []*SendRoom {
	start := len(lost)
	for room, r := range m.rooms {
		if r.Conn != c {
			continue
		}
		lost = append(lost, r)
		if !r.Sending {
			delete(m.rooms, room)
			m.tomb.Add(room, err.Error())
		}
	}
	slices.SortFunc(lost[start:], func(a, b *SendRoom) int { return cmpRoom(a.Room, b.Room) })
	return lost
}

// LostError is how a Send ends when its connection died with err.
func LostError(room uint64, err error) error { return fmt.Errorf("room %d: %w", room, err) }

func cmpRoom(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Claim starts a Send of room: refused for a room prefill already failed or one a Send
// carries already. The room need not be registered yet (the Send waits for it).
func (m *SendRooms) Claim(room uint64) (*SendRoom, error) {
	if reason, ok := m.tomb.Failed(room); ok {
		return nil, fmt.Errorf("%w: room %d already failed: %s", ErrPeer, room, reason)
	}
	r := m.rooms[room]
	if r == nil {
		r = m.newRoom(room)
		m.rooms[room] = r
	}
	if r.Sending {
		return nil, fmt.Errorf("%w: room %d", ErrDuplicate, room)
	}
	r.Sending = true
	return r, nil
}

// Check validates a registered room's Send of numTokens tokens from src (a store of
// numPages pages) against what decode registered; a bad one is FAILed to decode.
func (m *SendRooms) Check(r *SendRoom, src []int32, numTokens, firstToken, numPages int) error {
	need := (numTokens + m.pageSize - 1) / m.pageSize
	var err error
	switch {
	case numTokens != r.Reg.NumTokens:
		err = fmt.Errorf("%w: room %d: prefill has %d tokens, decode registered %d", ErrShape, r.Room, numTokens, r.Reg.NumTokens)
	case len(src) < need:
		err = fmt.Errorf("%w: room %d: %d source pages for %d tokens", ErrShape, r.Room, len(src), numTokens)
	case firstToken < 0 || firstToken > 1<<31-1:
		err = fmt.Errorf("%w: room %d: first token %d out of range", ErrShape, r.Room, firstToken)
	default:
		for _, p := range src[:need] {
			if p < 0 || int(p) >= numPages {
				err = fmt.Errorf("%w: room %d: source page %d out of range", ErrShape, r.Room, p)
				break
			}
		}
	}
	if err != nil {
		r.Conn.Enqueue(MsgFail, r.Room, []byte(clipReason(err.Error())))
	}
	return err
}

// AwaitAck: DONE of r's Send is written; decode must ACK within the ACK bound
// (AckExpired).
func (m *SendRooms) AwaitAck(r *SendRoom) {
	m.stopAck(r)
	if m.ack <= 0 || m.onAck == nil {
		return
	}
	step := r.ackStep
	r.ackTimer = m.clock.AfterFunc(m.ack, func() { m.onAck(r, step) })
}

// AckExpired is r's ACK timer that fired (armed for step): the error its Send ends with,
// after FAIL to decode, or nil when the Send ended or waits no more.
func (m *SendRooms) AckExpired(r *SendRoom, step uint64) error {
	if r.ackStep != step || r.ackTimer == nil || m.rooms[r.Room] != r || !r.Sending {
		return nil
	}
	r.ackTimer = nil
	err := fmt.Errorf("%w: room %d: no ACK from decode within %s", ErrTimeout, r.Room, m.ack)
	r.Conn.Enqueue(MsgFail, r.Room, []byte(clipReason(err.Error())))
	return err
}

func (m *SendRooms) stopAck(r *SendRoom) {
	r.ackStep++
	if r.ackTimer != nil {
		r.ackTimer.Stop()
		r.ackTimer = nil
	}
}

// Ended is the end of r's Send (err nil: ACKed): the room is forgotten, and tombstoned
// when it failed.
func (m *SendRooms) Ended(r *SendRoom, err error) {
	m.stopAck(r)
	if m.rooms[r.Room] == r {
		delete(m.rooms, r.Room)
	}
	if err != nil {
		m.tomb.Add(r.Room, err.Error())
	}
}

// Fail fails room from the prefill side: it is tombstoned (a later REGISTER is refused),
// decode is told with FAIL when it registered, and a Send carrying it ends with the
// returned error. r is nil when the room is unknown.
func (m *SendRooms) Fail(room uint64, reason string) (r *SendRoom, err error) {
	m.tomb.Add(room, reason)
	r = m.rooms[room]
	if r == nil {
		return nil, nil
	}
	if !r.Sending {
		delete(m.rooms, room)
	}
	if r.Conn != nil {
		r.Conn.Enqueue(MsgFail, room, []byte(clipReason(reason)))
	}
	return r, fmt.Errorf("kvtransfer: room %d failed by prefill: %s: %w", room, reason, ErrPeer)
}

// All lists every room (Close).
func (m *SendRooms) All() []*SendRoom {
	out := make([]*SendRoom, 0, len(m.rooms))
	for _, r := range m.rooms {
		out = append(out, r)
	}
	return out
}

// RegisterEvent is what a REGISTER came to (OnRegister): the room registered (Room),
// or refused with FAIL (Refused); when the bootstrap hook refused it, Failed is the room
// prefill failed with it, whose Send, if one carries it, ends with FailErr.
type RegisterEvent struct {
	Room    *SendRoom
	Refused string
	Failed  *SendRoom
	FailErr error
}

// OnRegister is decode's REGISTER of room on c (body undecoded) once the bootstrap hook
// said arg (its error herr): a "drop" closes the connection (the error), a "fail" or a
// hook error refuses the room and fails it from prefill's side (a Send waiting for it
// ends), a malformed body closes the connection; otherwise Register decides.
func (m *SendRooms) OnRegister(c Conn, room uint64, body []byte, peer, arg string, herr error) (RegisterEvent, error) {
	if arg == HookDrop {
		return RegisterEvent{}, HookDropError(HookBootstrap, 0)
	}
	if herr != nil || arg == HookFail {
		reason := HookRefusedReason(herr, arg)
		r, err := m.Fail(room, reason)
		m.Refuse(c, room, reason)
		return RegisterEvent{Refused: reason, Failed: r, FailErr: err}, nil
	}
	reg, err := ParseRegister(body)
	if err != nil {
		return RegisterEvent{}, err
	}
	r, refused := m.Register(c, room, reg, peer)
	return RegisterEvent{Room: r, Refused: refused}, nil
}
