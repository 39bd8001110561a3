package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
	"pdsoak/server/kvtransfer"
	"pdsoak/server/scheduler"
)

// The KV transfer: server/kvtransfer's room machines (RecvRooms on decode, SendRooms on
// prefill: registration, step bounds, frames, DONE/ACK, FAIL, tombstones, connection
// loss) on the KV link prefill-i->decode-j. This file is only their IO: a kvEnd carries
// a control message (real bytes) over the simulated connection to the peer's machine;
// page frames (real bytes of the simtime store, with their CRC32C) travel as one message
// per room unless the kvtransfer/send-frame failpoint is enabled (then one per frame,
// evaluated before each); the bootstrap failpoint is evaluated on every REGISTER. A
// paused peer stops its heartbeats: the other side breaks the connection after its idle
// timeout.
type kvSide struct {
	w    *worker
	recv *kvtransfer.RecvRooms // decode
	send *kvtransfer.SendRooms // prefill
	idle []*Timer              // heartbeat deaths armed while this process is paused
}

// kvConn is one KV connection; decode's end sends up, prefill's down.
type kvConn struct {
	c        *conn
	p, d     *worker
	ep       *kvtransfer.Endpoint
	up, down kvEnd
}

// kvEnd is one end of a kvConn as the machines see it (kvtransfer.Conn).
type kvEnd struct {
	kc  *kvConn
	dir int
}

func (e *kvEnd) Enqueue(t kvtransfer.MsgType, room uint64, body []byte) {
	kc, to := e.kc, e.kc.p
	if e.dir == down {
		to = kc.d
	}
	inc := to.inc
	kc.c.send(e.dir, kvtransfer.HeaderSize+len(body), func() { to.post(inc, func() { to.kv.handle(kc, t, room, body) }) })
}

// kvClock is the Loop's clock for RecvRooms; kvTimer one of its timers.
type kvClock struct{ l *Loop }
type kvTimer struct {
	l *Loop
	t *Timer
}

func (c kvClock) Now() time.Time { return c.l.Now() }
func (c kvClock) AfterFunc(d time.Duration, f func()) kvtransfer.Timer {
	return kvTimer{c.l, c.l.After(d, f)}
}
func (t kvTimer) Stop() bool { return t.l.Stop(t.t) }

func (k *kvSide) reset(w *worker) {
	*k = kvSide{w: w}
	kv, inc := w.b.KV(), w.inc
	k.send = kvtransfer.NewSendRooms(kv.PageSize, kvtransfer.DefaultTombstones, nil)
	k.send.AckBound(kvClock{w.t.loop}, kvtransfer.DefaultAckTimeout, func(r *kvtransfer.SendRoom, step uint64) {
		w.post(inc, func() {
			if err := k.send.AckExpired(r, step); err != nil {
				k.ended(r, err)
			}
		})
	})
	k.recv = kvtransfer.NewRecvRooms(kvClock{w.t.loop}, kvtransfer.RecvConfig{PageSize: kv.PageSize, Layers: kv.Layers,
		BytesPerToken: kv.BytesPerToken, NumPages: kv.NumPages, Handshake: kvtransfer.DefaultHandshakeTimeout,
		Waiting: w.spec.WaitingTimeout, Progress: w.spec.ProgressTimeout, StaleEndpoints: w.spec.StaleEndpoints},
		func(r *kvtransfer.RecvRoom, step uint64) {
			w.post(inc, func() {
				if err := k.recv.Expire(r, step); err != nil {
					k.end(r, err, true)
				}
			})
		})
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
	w.post(w.inc, func() { w.sched.Received(w.t.loop.Now(), room, tok, err); w.wake() })
}

func (k *kvSide) sent(room uint64, err error) {
	w := k.w
	w.post(w.inc, func() { w.sched.Sent(w.t.loop.Now(), room, err); w.wake() })
}

// startReceive (decode) registers room with its prefill, dialling it first if needed.
func (k *kvSide) startReceive(tr scheduler.Transfer) {
	ep, dial, err := k.recv.Start(&kvtransfer.RecvRoom{}, tr.Addr, tr.Room, tr.Pages, tr.NumTokens,
		func() *kvtransfer.Endpoint { return &kvtransfer.Endpoint{} })
	if err != nil {
		k.received(tr.Room, -1, err)
	} else if dial {
		k.dial(ep)
	}
}

func (k *kvSide) dial(ep *kvtransfer.Endpoint) {
	w, pi := k.w, prefillIndex(ep.Addr)
	var c *conn
	err := errors.New("unknown address")
	if pi >= 0 && pi < len(w.t.prefill) {
		if err = ErrConnRefused; w.t.prefill[pi].alive {
			c, err = w.t.links[ep.Addr+"->"+w.name].dial()
		}
	}
	if err != nil {
		k.lost(ep, kvtransfer.DialError(ep.Addr, err))
		return
	}
	p := w.t.prefill[pi]
	kc := &kvConn{c: c, p: p, d: w, ep: ep}
	kc.up, kc.down = kvEnd{kc, up}, kvEnd{kc, down}
	pinc, dinc := p.inc, w.inc
	c.onBreak = append(c.onBreak,
		func(err error) { w.post(dinc, func() { w.kv.lost(ep, connErr(err)) }) },
		func(err error) { p.post(pinc, func() { p.kv.connLost(kc, connErr(err)) }) })
	if p.paused {
		p.kv.armIdle(c, w)
	}
	k.recv.Connected(ep, &kc.up)
}

// connErr is a broken connection as kvtransfer reports it.
func connErr(err error) error {
	if errors.Is(err, gen.ErrTransfer) {
		return err
	}
	return fmt.Errorf("%w: %w", kvtransfer.ErrConnection, err)
}

// lost (decode) fails every room of a dead endpoint.
func (k *kvSide) lost(ep *kvtransfer.Endpoint, err error) {
	for _, r := range k.recv.Lost(ep) {
		k.end(r, kvtransfer.LostRoomError(r.Room, ep.Addr, err), false)
	}
}

func (k *kvSide) end(r *kvtransfer.RecvRoom, err error, notify bool) {
	if k.recv.End(r, err, notify) {
		k.received(r.Room, -1, err)
	}
}

// handle is a control message arriving at this side of kc; one the machine finds
// malformed breaks the connection, as a real reader closes it.
func (k *kvSide) handle(kc *kvConn, t kvtransfer.MsgType, room uint64, body []byte) {
	h := kvtransfer.Header{Type: t, Room: room}
	if k.w == kc.d {
		ev, err := k.recv.Handle(kc.ep, h, body)
		switch {
		case err != nil:
			kc.c.breakNow(err)
		case ev.Room != nil && ev.Err != nil:
			k.received(room, -1, ev.Err)
		case ev.Room != nil:
			k.received(room, ev.FirstToken, nil)
		}
		return
	}
	if t == kvtransfer.MsgRegister {
		k.register(kc, room, body)
		return
	}
	ev, err := k.send.Handle(&kc.down, h, body, kc.d.name)
	if err != nil {
		kc.c.breakNow(err)
	} else if ev.Room != nil {
		k.finish(ev.Room, ev.Err, ev.Abandoned)
	}
}

// pages (decode) is a PAGES message of room: the receiver's rule (RecvRooms.Pages,
// VerifyPages) with the payloads copied into the pages.
func (k *kvSide) pages(ep *kvtransfer.Endpoint, room uint64, es []kvtransfer.Entry, bodies [][]byte) {
	r, dst, err := k.recv.Pages(ep, room, es, k.w.b.KV(), nil)
	if r == nil || err != nil {
		if err != nil {
			k.end(r, err, true)
		}
		return
	}
	for i := range dst {
		copy(dst[i], bodies[i])
	}
	n, err := kvtransfer.VerifyPages(room, es, dst, nil)
	if err != nil {
		k.end(r, err, true)
		return
	}
	k.recv.Progress(r, len(es), n)
}

// hook evaluates a kvtransfer hook point's failpoint as the real Hook (failpoint.Eval)
// does, on the Loop: cont gets the return(...) argument at once, or "" once a sleep or
// a pause ends (worker.hold).
func (k *kvSide) hook(point string, cont func(arg string)) {
	w := k.w
	switch t := w.fire(point); {
	case t == nil:
		cont("")
	case t.Action == failpoint.ActPause || t.Action == failpoint.ActSleep:
		goOn := func() { cont("") }
		w.hold(point, t, goOn, goOn)
	default:
		cont(t.Arg)
	}
}

// register (prefill) is a REGISTER after the bootstrap hook (SendRooms.OnRegister,
// as Sender.onRegister); a connection that died during the hook registers nothing (the
// Sender's would, then lose it at once).
func (k *kvSide) register(kc *kvConn, room uint64, body []byte) {
	k.hook(kvtransfer.HookBootstrap, func(arg string) {
		if !kc.c.alive && arg != kvtransfer.HookFail {
			return
		}
		ev, err := k.send.OnRegister(&kc.down, room, body, kc.d.name, arg, nil)
		switch {
		case err != nil:
			kc.c.breakNow(err)
		case ev.Failed != nil && ev.Failed.Sending:
			k.ended(ev.Failed, ev.FailErr)
		case ev.Room != nil:
			k.w.sched.Registered(k.w.t.loop.Now(), room)
			k.w.wake()
			if s, ok := ev.Room.Owner.(scheduler.Send); ok { // a Send waited for the registration
				k.push(ev.Room, s)
			}
		}
	})
}

// startSend (prefill) sends the KV of a room once decode registered it.
func (k *kvSide) startSend(s scheduler.Send) {
	r, err := k.send.Claim(s.Room)
	switch {
	case err != nil:
		k.sent(s.Room, err)
	case r.Conn == nil:
		r.Owner = s
	default:
		k.push(r, s)
	}
}

// push sends r's frames, then DONE; the ACK ends the Send (handle).
func (k *kvSide) push(r *kvtransfer.SendRoom, s scheduler.Send) {
	w, kv := k.w, k.w.b.KV()
	if err := k.send.Check(r, s.Pages, s.NumTokens, s.FirstToken, kv.NumPages); err != nil {
		k.ended(r, err)
		return
	}
	kc := r.Conn.(*kvEnd).kc
	es := make([]kvtransfer.Entry, kvtransfer.NumFrames(kv.PageSize, kv.Layers, s.NumTokens))
	bodies := make([][]byte, len(es))
	for i := range es {
		e, b := kvtransfer.Frame(kv, s.Pages, s.NumTokens, i)
		es[i], bodies[i] = e, append([]byte(nil), b...) // the pages are freed once sent
	}
	d, dinc := kc.d, kc.d.inc
	deliver := func(from, to int) {
		size := kvtransfer.HeaderSize + (to-from)*kvtransfer.EntrySize
		for _, b := range bodies[from:to] {
			size += len(b)
		}
		kc.c.send(down, size, func() { d.post(dinc, func() { d.kv.pages(kc.ep, s.Room, es[from:to], bodies[from:to]) }) })
	}
	done := func() {
		kc.down.Enqueue(kvtransfer.MsgDone, s.Room, kvtransfer.AppendDone(nil,
			kvtransfer.Done{FirstToken: int32(s.FirstToken), NumTokens: uint32(s.NumTokens), Frames: uint32(len(es))}))
		// The ACK bound runs once DONE is written: once the link took its bytes.
		inc := w.inc
		w.t.loop.At(kc.c.busy[down], func() {
			w.post(inc, func() {
				if k.send.Get(s.Room) == r && kc.c.alive {
					k.send.AwaitAck(r)
				}
			})
		})
	}
	if fp := w.fps[failpoint.KVTransferSendFrame]; fp == nil || !fp.Enabled() {
		deliver(0, len(es))
		done()
		return
	}
	// Frame by frame, evaluating the send-frame hook before each (Sender.send).
	inc := w.inc
	var next func(i int)
	next = func(i int) {
		if k.send.Get(s.Room) != r || !kc.c.alive || inc != w.inc {
			return
		}
		if i == len(es) {
			done()
			return
		}
		k.hook(kvtransfer.HookSendFrame, func(arg string) {
			switch arg {
			case kvtransfer.HookDrop:
				kc.c.breakNow(kvtransfer.HookDropError(kvtransfer.HookSendFrame, s.Room))
				return
			case kvtransfer.HookCorrupt:
				bodies[i] = kvtransfer.Corrupt(bodies[i])
			}
			deliver(i, i+1)
			next(i + 1)
		})
	}
	next(0)
}

// ended ends r's Send with err (nil: ACKed) and tells the scheduler.
func (k *kvSide) ended(r *kvtransfer.SendRoom, err error) {
	k.send.Ended(r, err)
	k.sent(r.Room, err)
}

// finish is a room the machine ended: its Send ends with err, or the scheduler is told
// the room was abandoned.
func (k *kvSide) finish(r *kvtransfer.SendRoom, err error, abandoned string) {
	if r.Sending {
		k.ended(r, err)
	} else if abandoned != "" {
		k.sent(r.Room, kvtransfer.AbandonedError(r.Room, abandoned))
	}
}

// fail (prefill) fails a room from this side (tombstone, FAIL to decode).
func (k *kvSide) fail(room uint64, reason string) {
	if r, err := k.send.Fail(room, reason); r != nil && r.Sending {
		k.ended(r, err)
	}
}

// cancel abandons a room (scheduler Cancel), as cli's kvTransfer.Cancel does.
func (k *kvSide) cancel(room uint64) {
	if k.w.role == scheduler.RoleDecode {
		if r := k.recv.Get(room); r != nil {
			k.end(r, kvtransfer.CancelError(room, "cancelled by decode"), true)
		}
		return
	}
	k.fail(room, "cancelled by prefill")
}

// connLost (prefill) fails every room of a broken connection.
func (k *kvSide) connLost(kc *kvConn, err error) {
	for _, r := range k.send.ConnLost(&kc.down, err, nil) {
		k.finish(r, kvtransfer.LostError(r.Room, err), err.Error())
	}
}

// kvConns are the open connections of this worker's KV links, in link order.
func (k *kvSide) kvConns() (out []*conn) {
	for _, l := range k.w.t.linkOrder {
		if l.kv && (l.from == k.w.name || l.to == k.w.name) {
			out = append(out, l.conns...)
		}
	}
	return out
}

// crash breaks every KV connection of a dying process.
func (k *kvSide) crash() {
	for _, c := range k.kvConns() {
		c.breakNow(fmt.Errorf("%w: %s closed the connection", kvtransfer.ErrConnection, k.w.name))
	}
	k.resumed()
}

// paused: this process stops its heartbeats; each peer declares the connection dead
// after its idle timeout unless this side resumes first.
func (k *kvSide) paused() {
	for _, c := range k.kvConns() {
		peer := c.l.from
		if peer == k.w.name {
			peer = c.l.to
		}
		k.armIdle(c, k.w.t.worker(peer))
	}
}

func (k *kvSide) armIdle(c *conn, peer *worker) {
	idle := peer.spec.IdleTimeout
	k.idle = append(k.idle, k.w.t.loop.After(idle, func() { c.breakNow(kvtransfer.IdleError(k.w.name, idle, nil)) }))
}

func (k *kvSide) resumed() {
	for _, tm := range k.idle {
		k.w.t.loop.Stop(tm)
	}
	k.idle = nil
}
