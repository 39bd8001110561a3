package kvtransfer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// link is one TCP connection of either side. Control messages are written by the caller
// when one non-blocking write takes them (tryInline), else queued and written by the
// link's writer goroutine (which also sends heartbeats), so a reader never blocks on a
// write; page frames are written synchronously by the sending goroutine. Every write holds
// wmu and carries a write deadline of frameTimeout.
//
// Page frames are gathered, not copied: each room's pending frames form one PAGES batch
// (a table, then the payloads referenced in place: the sender's pages stay untouched until
// Send returns, and a Send that ends early forgets its frames), and every pending batch
// leaves in one writev when the batches are full, or before the next control message or
// heartbeat. On the receiving side the payloads are read straight into the destination
// pages (readPayloads).
type link struct {
	c    net.Conn
	cfg  *config
	peer string
	br   *bufio.Reader
	// maxPage bounds a page frame this side accepts (0 on the sender: it accepts none).
	maxPage uint32

	wmu       sync.Mutex
	batches   []*batch // under wmu: one per room with frames pending, in order
	free      []*batch // under wmu: emptied batches, reused
	pendBytes int      // under wmu: payload bytes in batches
	pendFrame int      // under wmu: frames in batches
	out       net.Buffers

	qmu    sync.Mutex
	q      [][]byte
	notify chan struct{}

	dead    chan struct{}
	once    sync.Once
	deadErr error // set before dead is closed
}

// batch is one room's pending PAGES message.
type batch struct {
	room     uint64
	head     []byte // the header, then the table
	payloads [][]byte
}

// Batch limits: write out once this many payload bytes or frames are pending.
const (
	flushBytes  = 1 << 20
	flushFrames = 256
	// readBuffer holds headers, control messages and PAGES tables; payloads bypass it.
	readBuffer = 32 << 10
)

// newLink leaves the socket buffers to the kernel's autotuning: 4 MiB buffers made no
// measurable difference to BenchmarkTransfer, and setting them turns autotuning off.
func newLink(c net.Conn, cfg *config) *link {
	return &link{c: c, cfg: cfg, peer: c.RemoteAddr().String(), br: bufio.NewReaderSize(c, readBuffer),
		notify: make(chan struct{}, 1), dead: make(chan struct{})}
}

// kill closes the connection once; err says why.
func (l *link) kill(err error) {
	l.once.Do(func() {
		l.deadErr = err
		_ = l.c.Close()
		close(l.dead)
	})
}

// err is why the link died (nil while it lives).
func (l *link) err() error {
	select {
	case <-l.dead:
		return l.deadErr
	default:
		return nil
	}
}

// Enqueue queues a control message for the writer goroutine, or writes it at once when
// that cannot block (tryInline).
func (l *link) Enqueue(t MsgType, room uint64, body []byte) {
	msg := appendMessage(make([]byte, 0, HeaderSize+len(body)), t, room, body)
	if l.tryInline(msg) {
		return
	}
	l.qmu.Lock()
	l.q = append(l.q, msg)
	l.qmu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// writeLoop drains the control queue and sends heartbeats until the link dies.
func (l *link) writeLoop() {
	t := time.NewTicker(l.cfg.heartbeatInterval)
	defer t.Stop()
	hb := appendMessage(nil, MsgHeartbeat, 0, nil)
	for {
		select {
		case <-l.dead:
			return
		case <-t.C:
			if err := l.write(hb); err != nil {
				l.kill(fmt.Errorf("%w: heartbeat to %s: %w", ErrConnection, l.peer, err))
				return
			}
		case <-l.notify:
			// Each message leaves the queue only once written: while the queue is not
			// empty tryInline queues behind it. (Taking the whole queue first let an
			// inline write, partial on a full socket, land between two of its messages.)
			for {
				l.qmu.Lock()
				if len(l.q) == 0 {
					l.qmu.Unlock()
					break
				}
				m := l.q[0]
				l.qmu.Unlock()
				if err := l.write(m); err != nil {
					l.kill(fmt.Errorf("%w: write to %s: %w", ErrConnection, l.peer, err))
					return
				}
				l.qmu.Lock()
				l.q[0] = nil
				l.q = l.q[1:]
				l.qmu.Unlock()
			}
		}
	}
}

// write writes one encoded message, after any page frames still pending, with the frame
// deadline.
func (l *link) write(msg []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.err(); err != nil {
		l.dropLocked()
		return err
	}
	return l.flushLocked(msg)
}

// flushLocked writes every pending batch, then msg (if any), in one writev.
func (l *link) flushLocked(msg []byte) error {
	out := l.out[:0]
	for _, b := range l.batches {
		binary.BigEndian.PutUint32(b.head[20:], uint32(len(b.head)-HeaderSize))
		binary.BigEndian.PutUint32(b.head[24:], Checksum(b.head[HeaderSize:]))
		out = append(out, b.head)
		out = append(out, b.payloads...)
	}
	if msg != nil {
		out = append(out, msg)
	}
	var err error
	if len(out) > 0 {
		_ = l.c.SetWriteDeadline(time.Now().Add(l.cfg.frameTimeout))
		bufs := out // WriteTo consumes its receiver
		_, err = bufs.WriteTo(l.c)
	}
	clear(out) // drop references to the sender's pages
	l.out = out[:0]
	l.dropLocked()
	return err
}

// dropLocked forgets every pending batch (written, or never to be).
func (l *link) dropLocked() {
	for _, b := range l.batches {
		l.release(b)
	}
	clear(l.batches)
	l.batches, l.pendBytes, l.pendFrame = l.batches[:0], 0, 0
}

func (l *link) release(b *batch) {
	clear(b.payloads)
	b.payloads = b.payloads[:0]
	l.free = append(l.free, b)
}

// forget drops the pending frames of room: its Send ended early, and the pages they
// point at go back to the caller (decode fails the room anyway).
func (l *link) forget(room uint64) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	for i, b := range l.batches {
		if b.room == room {
			for _, p := range b.payloads {
				l.pendBytes -= len(p)
			}
			l.pendFrame -= len(b.payloads)
			l.batches = append(l.batches[:i], l.batches[i+1:]...)
			l.release(b)
			return
		}
	}
}

// writeFrame queues a page frame of room (its payload is not copied) and writes the
// pending batches out when they are full. With corrupt, a copy of the payload with one
// byte flipped is sent under the original CRC.
func (l *link) writeFrame(room uint64, e Entry, payload []byte, corrupt bool) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.err(); err != nil {
		l.dropLocked()
		return err
	}
	if corrupt {
		payload = Corrupt(payload)
	}
	var b *batch
	for _, x := range l.batches {
		if x.room == room {
			b = x
			break
		}
	}
	if b == nil {
		if n := len(l.free); n > 0 {
			b, l.free = l.free[n-1], l.free[:n-1]
		} else {
			b = &batch{head: make([]byte, 0, HeaderSize+flushFrames*EntrySize)}
		}
		b.room = room
		b.head = b.head[:HeaderSize]
		(&Header{Type: MsgPages, Room: room}).Put(b.head) // Len and CRC at flush
		l.batches = append(l.batches, b)
	}
	b.head = AppendEntry(b.head, e)
	b.payloads = append(b.payloads, payload)
	l.pendBytes += len(payload)
	l.pendFrame++
	var err error
	if l.pendBytes >= flushBytes || l.pendFrame >= flushFrames {
		err = l.flushLocked(nil)
	}
	if err != nil {
		err = fmt.Errorf("%w: write frame to %s: %w", ErrConnection, l.peer, err)
		l.kill(err)
	}
	return err
}

// Corrupt is a copy of a frame's payload with one byte flipped (the send-frame hook's
// "corrupt", sent under the original CRC); its own copy, as it stays pending.
func Corrupt(payload []byte) []byte {
	if len(payload) == 0 {
		return payload
	}
	b := append([]byte(nil), payload...)
	b[len(b)/2] ^= 0x5a
	return b
}

// read reads the next message. The deadline is the idle timeout: heartbeats arrive well
// within it on a live connection. The body is valid until the next read.
func (l *link) read(buf []byte) (Header, []byte, []byte, error) {
	_ = l.c.SetReadDeadline(time.Now().Add(l.cfg.idleTimeout))
	h, body, buf, err := ReadMessage(l.br, buf)
	return h, body, buf, l.readErr(err)
}

// IdleError is how a connection dies when nothing came from peer for idle (its
// heartbeats lost); cause is the read's error, if any.
func IdleError(peer string, idle time.Duration, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: nothing from %s for %s (heartbeats lost)", ErrTimeout, peer, idle)
	}
	return fmt.Errorf("%w: nothing from %s for %s (heartbeats lost): %w", ErrTimeout, peer, idle, cause)
}

// readErr says what a failed read means for the connection.
func (l *link) readErr(err error) error {
	if err == nil {
		return nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return IdleError(l.peer, l.cfg.idleTimeout, err)
	} else if !errors.Is(err, ErrProtocol) {
		return fmt.Errorf("%w: read from %s: %w", ErrConnection, l.peer, err)
	}
	return err
}

// readPayloads fills every slice of dst in order: first with what br already holds,
// then straight from the connection (readv where there is one), so that a payload is
// copied once, by the kernel, into its page. Every write holds g (pageGuard). dst's
// slices are consumed.
func (l *link) readPayloads(dst [][]byte, g *pageGuard) error {
	for len(dst) > 0 && (len(dst[0]) == 0 || l.br.Buffered() > 0) {
		if len(dst[0]) > 0 {
			g.lock(dst)
			n, _ := l.br.Read(dst[0]) // buffered: copies, no I/O
			g.unlock()
			dst[0] = dst[0][n:]
		}
		if len(dst[0]) == 0 {
			dst = dst[1:]
		}
	}
	if len(dst) == 0 {
		return nil
	}
	_ = l.c.SetReadDeadline(time.Now().Add(l.cfg.idleTimeout))
	return l.readErr(bodyErr(readv(l.c, dst, g)))
}

// readEach is readv without the system call: each payload is read into the guard's
// sink, then copied into place under the guard.
func readEach(r io.Reader, dst [][]byte, g *pageGuard) error {
	var tmp []byte
	for i, d := range dst {
		if cap(tmp) < len(d) {
			tmp = make([]byte, len(d))
		}
		if _, err := io.ReadFull(r, tmp[:len(d)]); err != nil {
			return err
		}
		g.lock(dst[i:])
		copy(dst[i], tmp)
		g.unlock()
	}
	return nil
}
