package kvtransfer

import (
	"fmt"
	"time"

	"pdsoak/server/gen"
)

// The room lifecycle's rules and errors, used by the room machines (RecvRooms,
// SendRooms), which the Receiver and Sender drive on sockets and the simulator's KV link
// (sim) on virtual connections.

// The steps a room waits for on the receiver, each bounded: REGISTER_ACK by the
// handshake timeout, the first frame by the waiting timeout (WithWaitingTimeout; 0 leaves
// it to the engine), every next frame by the progress timeout (WithProgressTimeout).
const (
	StepRegisterAck = "REGISTER_ACK"
	StepFirstFrame  = "first frame (waiting timeout)"
	StepNextFrame   = "next frame"
)

// StepTimeoutError is how the receiver fails a room whose step did not end within d.
func StepTimeoutError(room uint64, step string, d time.Duration) error {
	return fmt.Errorf("%w: room %d: no %s within %s", ErrTimeout, room, step, d)
}

// Tombstones are the rooms the sender failed, with why, so that a REGISTER arriving
// later is refused at once. Only the last n are kept (a ring): a process that serves
// for days must not remember every room it ever failed. Not safe for concurrent use.
type Tombstones struct {
	reason map[uint64]string
	ring   []uint64
	next   int
	n      int
}

// NewTombstones remembers the last n failed rooms (n ≤ 0: none).
func NewTombstones(n int) *Tombstones {
	return &Tombstones{reason: map[uint64]string{}, n: n}
}

// Add records room as failed; the first reason given stays.
func (t *Tombstones) Add(room uint64, reason string) {
	if t.n <= 0 {
		return
	}
	if _, ok := t.reason[room]; ok {
		return
	}
	if len(t.ring) < t.n {
		t.ring = append(t.ring, room)
	} else {
		delete(t.reason, t.ring[t.next])
		t.ring[t.next] = room
		t.next = (t.next + 1) % len(t.ring)
	}
	t.reason[room] = reason
}

// Failed reports whether room is remembered as failed, and why.
func (t *Tombstones) Failed(room uint64) (reason string, ok bool) {
	reason, ok = t.reason[room]
	return reason, ok
}

// AbandonedError is what prefill's scheduler is told when decode abandons a registered
// room that no Send carries yet (a FAIL from decode, or the connection lost), with the
// reason the sender gives WithOnAbort.
func AbandonedError(room uint64, reason string) error {
	return fmt.Errorf("kvtransfer: decode abandoned room %d: %s: %w", room, reason, gen.ErrTransfer)
}

// RefusedRegisterReason is the FAIL reason of a REGISTER for a room the sender failed.
func RefusedRegisterReason(reason string) string {
	return "prefill already failed the room: " + reason
}
