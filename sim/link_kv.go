package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"pdsoak/server/failpoint"
	"pdsoak/server/kvtransfer"
	"pdsoak/server/scheduler"
)

// The KV transfer, modelled on server/kvtransfer's protocol over the KV link
// prefill-i->decode-j: decode dials prefill once per pair and reuses the connection;
// REGISTER (decode→prefill) makes prefill's scheduler see Registered and is answered by
// REGISTER_ACK; after the forward pass prefill sends one PAGE frame per page and layer
// (each with its CRC32C, kvtransfer.Checksum of the real bytes of its simtime KV store),
// then DONE; decode verifies every frame (a corrupt one fails the room with
// kvtransfer.ErrChecksum, as the real receiver does, and FAILs it to prefill), copies the
// bytes into its own pages, reports Received and ACKs; prefill reports Sent on the ACK.
// A broken connection fails every room on it on both sides (kvtransfer.ErrConnection);
// a paused peer stops its heartbeats and the other side declares the connection dead
// after the idle timeout. Every step of a room on decode is bounded as the receiver
// bounds it (kvtransfer.StepRegisterAck, StepFirstFrame, StepNextFrame): REGISTER_ACK by
// kvtransfer.DefaultHandshakeTimeout, the first frame and the next by the waiting and
// progress timeouts (from the flags, as cli.newTransfer sets them). Prefill remembers
// the rooms it failed in kvtransfer.Tombstones, the sender's bounded ring.
//
// Faults: the kvtransfer/send-frame failpoint (kv_transfer_stall/drop/corrupt) is
// evaluated before every frame with failpoint.Fire; kvtransfer/bootstrap
// (bootstrap_stall) on every REGISTER. Without an enabled send-frame failpoint the
// frames of a room travel as one message (same bytes, same arrival time).

type kvSide struct {
	w *worker
	// decode
	conns map[int]*kvConn // by prefill index
	rooms map[uint64]*kvRoom
	// prefill
	regs       map[uint64]*kvReg
	tombstones *kvtransfer.Tombstones
	idle       []*Timer // heartbeat deaths armed while this process is paused
}

type kvConn struct {
	c    *conn
	p, d *worker
	dead bool // broken (kept cached only under BugStaleBootstrapEndpoint)
}

// kvRoom is a room on decode.
type kvRoom struct {
	room      uint64
	kc        *kvConn
	pages     []int32
	numTokens int
	timer     *Timer // waiting or progress bound
	ended     bool
}

// kvReg is a room on prefill: decode's registration, then the send.
type kvReg struct {
	room      uint64
	kc        *kvConn
	dest      []int32
	numTokens int
	sending   bool
	ended     bool
}

func (k *kvSide) reset(w *worker) {
	*k = kvSide{w: w, conns: map[int]*kvConn{}, rooms: map[uint64]*kvRoom{}, regs: map[uint64]*kvReg{},
		tombstones: kvtransfer.NewTombstones(kvtransfer.DefaultTombstones)}
}

// prefillIndex maps a bootstrap address ("prefill-3") to the worker's index.
func prefillIndex(addr string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(addr, "prefill-"))
	if err != nil || !strings.HasPrefix(addr, "prefill-") {
		return -1
	}
	return n
}

// received and sent post the outcome to the worker's scheduler (the TransferSink).
func (k *kvSide) received(room uint64, tok int, err error) {
	w := k.w
	w.post(w.inc, func() {
		w.sched.Received(w.t.loop.Now(), room, tok, err)
		w.wake()
	})
}

func (k *kvSide) sent(room uint64, err error) {
	w := k.w
	w.post(w.inc, func() {
		w.sched.Sent(w.t.loop.Now(), room, err)
		w.wake()
	})
}

// startReceive (decode) registers room with its prefill and waits for the KV.
func (k *kvSide) startReceive(tr scheduler.Transfer) {
	w := k.w
	pi := prefillIndex(tr.Addr)
	if pi < 0 || pi >= len(w.t.prefill) {
		k.received(tr.Room, -1, fmt.Errorf("%w: dial prefill %s: unknown address", kvtransfer.ErrConnection, tr.Addr))
		return
	}
	kc := k.conns[pi]
	if kc == nil || (kc.dead && !w.spec.StaleEndpoints) {
		p := w.t.prefill[pi]
		l := w.t.links[p.name+"->"+w.name]
		var c *conn
		var err error
		if !p.alive {
			err = ErrConnRefused
		} else {
			c, err = l.dial()
		}
		if err != nil {
			k.received(tr.Room, -1, fmt.Errorf("%w: dial prefill %s: %w", kvtransfer.ErrConnection, tr.Addr, err))
			return
		}
		kc = &kvConn{c: c, p: p, d: w}
		k.conns[pi] = kc
		pinc, dinc := p.inc, w.inc
		c.onBreak = append(c.onBreak,
			func(err error) { w.post(dinc, func() { w.kv.connLost(kc, err) }) },
			func(err error) { p.post(pinc, func() { p.kv.connLost(kc, err) }) })
		if p.paused {
			p.kv.armIdle(kc)
		}
	}
	r := &kvRoom{room: tr.Room, kc: kc, pages: tr.Pages, numTokens: tr.NumTokens}
	k.rooms[tr.Room] = r
	k.arm(r, kvtransfer.DefaultHandshakeTimeout, kvtransfer.StepRegisterAck)
	if kc.dead { // BugStaleBootstrapEndpoint: registered on a dead connection, never answered
		return
	}
	p, pinc := kc.p, kc.p.inc
	kc.c.send(up, 8+4*len(tr.Pages)+frameHeader, func() {
		p.post(pinc, func() { p.kv.register(kc, tr.Room, tr.Pages, tr.NumTokens) })
	})
}

// register (prefill) handles a REGISTER.
func (k *kvSide) register(kc *kvConn, room uint64, dest []int32, numTokens int) {
	w := k.w
	if t := w.fire(failpoint.KVTransferBootstrap); t != nil {
		inc := w.inc
		again := func() { w.post(inc, func() { k.registerNow(kc, room, dest, numTokens) }) }
		switch {
		case t.Action == failpoint.ActPause:
			w.fps[failpoint.KVTransferBootstrap].waiters = append(w.fps[failpoint.KVTransferBootstrap].waiters, again)
			return
		case t.Action == failpoint.ActSleep:
			w.t.loop.After(t.Sleep, again)
			return
		case t.Action == failpoint.ActReturn && t.Arg == kvtransfer.HookDrop:
			kc.c.breakNow(fmt.Errorf("%w: dropped by hook %s", kvtransfer.ErrConnection, kvtransfer.HookBootstrap))
			return
		case t.Action == failpoint.ActReturn && t.Arg == kvtransfer.HookFail:
			k.failDown(kc, room, "refused by hook "+kvtransfer.HookBootstrap)
			return
		}
	}
	k.registerNow(kc, room, dest, numTokens)
}

func (k *kvSide) registerNow(kc *kvConn, room uint64, dest []int32, numTokens int) {
	w := k.w
	if !kc.c.alive {
		return
	}
	if reason, ok := k.tombstones.Failed(room); ok {
		k.failDown(kc, room, kvtransfer.RefusedRegisterReason(reason))
		return
	}
	k.regs[room] = &kvReg{room: room, kc: kc, dest: dest, numTokens: numTokens}
	w.sched.Registered(w.t.loop.Now(), room)
	w.wake()
	d, dinc := kc.d, kc.d.inc
	kc.c.send(down, frameHeader, func() { d.post(dinc, func() { d.kv.registerAck(room) }) })
}

// registerAck (decode) starts the waiting bound.
func (k *kvSide) registerAck(room uint64) {
	r := k.rooms[room]
	if r == nil || r.ended {
		return
	}
	k.arm(r, k.w.spec.WaitingTimeout, kvtransfer.StepFirstFrame)
}

// arm (re)starts the bound of the room's step (d ≤ 0: unbounded), as the receiver does.
func (k *kvSide) arm(r *kvRoom, d time.Duration, what string) {
	w := k.w
	w.t.loop.Stop(r.timer)
	if d <= 0 {
		return
	}
	inc := w.inc
	r.timer = w.t.loop.After(d, func() {
		w.post(inc, func() {
			if r.ended {
				return
			}
			k.failRoom(r, kvtransfer.StepTimeoutError(r.room, what, d), true)
		})
	})
}

// failRoom (decode) ends a room with err, telling prefill when up.
func (k *kvSide) failRoom(r *kvRoom, err error, up_ bool) {
	r.ended = true
	k.w.t.loop.Stop(r.timer)
	delete(k.rooms, r.room)
	if up_ && !r.kc.dead && r.kc.c.alive {
		p, pinc, room := r.kc.p, r.kc.p.inc, r.room
		reason := err.Error()
		r.kc.c.send(up, frameHeader+len(reason), func() {
			p.post(pinc, func() { p.kv.decodeFailed(room, reason) })
		})
	}
	k.received(r.room, -1, err)
}

// decodeFailed (prefill) is a FAIL from decode.
func (k *kvSide) decodeFailed(room uint64, reason string) {
	g := k.regs[room]
	if g == nil || g.ended {
		return
	}
	g.ended = true
	delete(k.regs, room)
	k.tombstones.Add(room, "decode: "+reason)
	if g.sending {
		k.sent(room, fmt.Errorf("room %d: %w", room, fmt.Errorf("%w: room %d: decode: %s", kvtransfer.ErrPeer, room, reason)))
		return
	}
	k.sent(room, kvtransfer.AbandonedError(room, "decode: "+reason))
}

// failDown (prefill) FAILs a room to decode.
func (k *kvSide) failDown(kc *kvConn, room uint64, reason string) {
	d, dinc := kc.d, kc.d.inc
	kc.c.send(down, frameHeader+len(reason), func() {
		d.post(dinc, func() {
			if r := d.kv.rooms[room]; r != nil && !r.ended {
				d.kv.failRoom(r, fmt.Errorf("%w: room %d: prefill: %s", kvtransfer.ErrPeer, room, reason), false)
			}
		})
	})
}

// startSend (prefill) sends the KV of a room.
func (k *kvSide) startSend(s scheduler.Send) {
	w := k.w
	g := k.regs[s.Room]
	if g == nil || g.ended {
		k.sent(s.Room, fmt.Errorf("%w: room %d already failed: not registered", kvtransfer.ErrPeer, s.Room))
		return
	}
	if g.numTokens != s.NumTokens {
		g.ended = true
		delete(k.regs, s.Room)
		k.failDown(g.kc, s.Room, "shape mismatch")
		k.sent(s.Room, fmt.Errorf("%w: room %d: prefill has %d tokens, decode registered %d", kvtransfer.ErrShape, s.Room, s.NumTokens, g.numTokens))
		return
	}
	g.sending = true
	kv := w.b.KV()
	ps, per := kv.PageSize, kv.BytesPerToken
	// The frames: the first n tokens of each page and layer, with their checksums.
	type frame struct {
		body []byte
		crc  uint32
		dst  int32
		l    int
	}
	var frames []frame
	for i, src := range s.Pages {
		n := min(ps, s.NumTokens-i*ps)
		if n <= 0 {
			break
		}
		for l := 0; l < kv.Layers; l++ {
			b := append([]byte(nil), kv.LayerBytes(src, l)[:n*per]...)
			frames = append(frames, frame{body: b, crc: kvtransfer.Checksum(b), dst: g.dest[i], l: l})
		}
	}
	d, dinc := g.kc.d, g.kc.d.inc
	kc := g.kc
	deliverFrames := func(from, to int) {
		bytes := 0
		for _, f := range frames[from:to] {
			bytes += len(f.body) + frameHeader
		}
		batch := frames[from:to]
		kc.c.send(down, bytes, func() {
			d.post(dinc, func() {
				r := d.kv.rooms[s.Room]
				if r == nil || r.ended {
					return
				}
				for _, f := range batch {
					if got := kvtransfer.Checksum(f.body); got != f.crc {
						d.kv.failRoom(r, fmt.Errorf("%w: room %d layer %d page %d (crc32c %#08x, computed %#08x)",
							kvtransfer.ErrChecksum, s.Room, f.l, f.dst, f.crc, got), true)
						return
					}
					dkv := d.b.KV()
					copy(dkv.LayerBytes(f.dst, f.l), f.body)
				}
				d.kv.arm(r, d.spec.ProgressTimeout, kvtransfer.StepNextFrame)
			})
		})
	}
	done := func() {
		kc.c.send(down, frameHeader+12, func() {
			d.post(dinc, func() {
				r := d.kv.rooms[s.Room]
				if r == nil || r.ended {
					return
				}
				r.ended = true
				d.t.loop.Stop(r.timer)
				delete(d.kv.rooms, s.Room)
				d.kv.received(s.Room, s.FirstToken, nil)
				p, pinc := kc.p, kc.p.inc
				kc.c.send(up, frameHeader, func() {
					p.post(pinc, func() {
						if g.ended {
							return
						}
						g.ended = true
						delete(p.kv.regs, s.Room)
						p.kv.sent(s.Room, nil)
					})
				})
			})
		})
	}
	if w.fps[failpoint.KVTransferSendFrame] == nil {
		deliverFrames(0, len(frames))
		done()
		return
	}
	// Frame by frame, evaluating the send-frame failpoint before each.
	inc := w.inc
	var next func(i int)
	next = func(i int) {
		if g.ended || !kc.c.alive || inc != w.inc {
			return
		}
		if i == len(frames) {
			done()
			return
		}
		if t := w.fire(failpoint.KVTransferSendFrame); t != nil {
			switch {
			case t.Action == failpoint.ActPause:
				fp := w.fps[failpoint.KVTransferSendFrame]
				fp.waiters = append(fp.waiters, func() { w.post(inc, func() { next(i) }) })
				return
			case t.Action == failpoint.ActSleep:
				w.t.loop.After(t.Sleep, func() {
					w.post(inc, func() {
						deliverFrames(i, i+1)
						next(i + 1)
					})
				})
				return
			case t.Action == failpoint.ActReturn && t.Arg == kvtransfer.HookDrop:
				kc.c.breakNow(fmt.Errorf("%w: room %d: dropped by hook %s", kvtransfer.ErrConnection, s.Room, kvtransfer.HookSendFrame))
				return
			case t.Action == failpoint.ActReturn && t.Arg == kvtransfer.HookCorrupt:
				b := frames[i].body
				if len(b) > 0 {
					b[len(b)/2] ^= 0xff // after the CRC was computed
				}
			}
		}
		deliverFrames(i, i+1)
		next(i + 1)
	}
	next(0)
}

// cancel abandons a room (scheduler Cancel): decode FAILs it to prefill, prefill
// tombstones it and FAILs it to decode.
func (k *kvSide) cancel(room uint64) {
	if r := k.rooms[room]; r != nil && !r.ended {
		r.ended = true
		k.w.t.loop.Stop(r.timer)
		delete(k.rooms, room)
		if !r.kc.dead && r.kc.c.alive {
			p, pinc := r.kc.p, r.kc.p.inc
			r.kc.c.send(up, frameHeader, func() {
				p.post(pinc, func() { p.kv.decodeFailed(room, "cancelled by decode") })
			})
		}
		return
	}
	k.tombstones.Add(room, "cancelled by prefill")
	if g := k.regs[room]; g != nil && !g.ended {
		g.ended = true
		delete(k.regs, room)
		k.failDown(g.kc, room, "cancelled by prefill")
	}
}

// connLost fails every room of a broken connection on this side.
func (k *kvSide) connLost(kc *kvConn, err error) {
	kc.dead = true
	if k.w == kc.d {
		if !k.w.spec.StaleEndpoints {
			for pi, x := range k.conns {
				if x == kc {
					delete(k.conns, pi)
				}
			}
		}
		for _, room := range sortedRooms(k.rooms) {
			if r := k.rooms[room]; r.kc == kc {
				k.failRoom(r, fmt.Errorf("room %d: prefill %s: %w: %v", room, kc.p.name, kvtransfer.ErrConnection, err), false)
			}
		}
		return
	}
	for _, room := range sortedRooms(k.regs) {
		g := k.regs[room]
		if g.kc != kc {
			continue
		}
		g.ended = true
		delete(k.regs, room)
		k.tombstones.Add(room, err.Error())
		if g.sending {
			k.sent(room, fmt.Errorf("room %d: %w: decode %s: %v", room, kvtransfer.ErrConnection, kc.d.name, err))
		} else {
			k.sent(room, kvtransfer.AbandonedError(room, err.Error()))
		}
	}
}

// kvConns lists the connections this worker holds (decode: its own; prefill: found on
// the decode workers), in a fixed order.
func (k *kvSide) kvConns() []*kvConn {
	var out []*kvConn
	if k.w.role == scheduler.RoleDecode {
		for pi := range k.w.t.prefill {
			if kc := k.conns[pi]; kc != nil && !kc.dead {
				out = append(out, kc)
			}
		}
		return out
	}
	for _, d := range k.w.t.decode {
		if kc := d.kv.conns[k.w.idx]; kc != nil && !kc.dead && kc.p == k.w {
			out = append(out, kc)
		}
	}
	return out
}

// crash breaks every KV connection of a dying process.
func (k *kvSide) crash() {
	for _, kc := range k.kvConns() {
		kc.c.breakNow(fmt.Errorf("%w: %s closed the connection", kvtransfer.ErrConnection, k.w.name))
	}
	k.disarmIdle()
}

// paused: this process stops its heartbeats; each peer declares the connection dead
// after its idle timeout.
func (k *kvSide) paused() {
	for _, kc := range k.kvConns() {
		k.armIdle(kc)
	}
}

// armIdle breaks kc after the peer's idle timeout (the side still running declares the
// connection dead) unless this paused side resumes first.
func (k *kvSide) armIdle(kc *kvConn) {
	peer := kc.d
	if peer == k.w {
		peer = kc.p
	}
	idle := peer.spec.IdleTimeout
	k.idle = append(k.idle, k.w.t.loop.After(idle, func() {
		kc.c.breakNow(fmt.Errorf("%w: no message for %s", kvtransfer.ErrConnection, idle))
	}))
}

func (k *kvSide) resumed() { k.disarmIdle() }

func (k *kvSide) disarmIdle() {
	for _, tm := range k.idle {
		k.w.t.loop.Stop(tm)
	}
	k.idle = nil
}

// sortedRooms lists a room map's keys in order (deterministic iteration).
func sortedRooms[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}
