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

// link is one TCP connection of either side. Control messages are queued and written by
// the link's writer goroutine (which also sends heartbeats), so a reader never blocks on a
// write; page frames are written synchronously by the sending goroutine. Every write holds
// wmu and carries a write deadline of frameTimeout.
//
// Writes are gathered, not copied: a page frame's header goes into hdrs and its payload
// is referenced in place (the sender's pages stay untouched until Send returns, and Send
// flushes before it returns), and the whole batch leaves in one writev. Reads go through
// one large buffer; a page body that fits is handed out in place (no copy) and consumed
// at the next read.
type link struct {
	c    net.Conn
	cfg  *config
	peer string
	br   *bufio.Reader
	// skip is how many bytes of br the previous read handed out in place.
	skip int
	// maxPage bounds the body of a page frame this side accepts (0 on the sender).
	maxPage uint32

	wmu       sync.Mutex
	pend      net.Buffers // under wmu: headers and payloads not yet written
	pendBytes int         // under wmu
	hdrs      []byte      // under wmu: the headers pend refers to (fixed capacity)

	qmu    sync.Mutex
	q      [][]byte
	notify chan struct{}

	dead    chan struct{}
	once    sync.Once
	deadErr error // set before dead is closed
}

// Batch limits: flush once this many payload bytes or frames are pending. A frame is two
// entries of a writev; the kernel takes at most 1024 per call (IOV_MAX).
const (
	flushBytes  = 1 << 20
	flushFrames = 256
	readBuffer  = 1 << 20
	// socketBuffer is asked of the kernel for both directions, so that a batch of
	// flushBytes fits in flight.
	socketBuffer = 4 << 20
)

func newLink(c net.Conn, cfg *config) *link {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(socketBuffer) // a hint: the kernel caps it (net.core.wmem_max)
		_ = tc.SetReadBuffer(socketBuffer)
	}
	return &link{c: c, cfg: cfg, peer: c.RemoteAddr().String(), br: bufio.NewReaderSize(c, readBuffer),
		hdrs: make([]byte, 0, HeaderSize*flushFrames), notify: make(chan struct{}, 1), dead: make(chan struct{})}
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

// enqueue queues a control message for the writer goroutine.
func (l *link) enqueue(t MsgType, room uint64, body []byte) {
	msg := appendMessage(make([]byte, 0, HeaderSize+len(body)), t, room, body)
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
			l.qmu.Lock()
			q := l.q
			l.q = nil
			l.qmu.Unlock()
			for _, m := range q {
				if err := l.write(m); err != nil {
					l.kill(fmt.Errorf("%w: write to %s: %w", ErrConnection, l.peer, err))
					return
				}
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
		return err
	}
	l.pend = append(l.pend, msg)
	return l.flushLocked()
}

// flush writes out pending page frames. A Send calls it before it returns on any path, so
// no pending entry refers to its pages afterwards.
func (l *link) flush() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.err(); err != nil {
		l.dropLocked()
		return err
	}
	return l.flushLocked()
}

func (l *link) flushLocked() error {
	if len(l.pend) == 0 {
		return nil
	}
	_ = l.c.SetWriteDeadline(time.Now().Add(l.cfg.frameTimeout))
	bufs := l.pend // WriteTo consumes its receiver
	_, err := bufs.WriteTo(l.c)
	l.dropLocked()
	return err
}

// dropLocked forgets the pending batch (written, or never to be).
func (l *link) dropLocked() {
	clear(l.pend) // drop references to the sender's pages
	l.pend, l.pendBytes, l.hdrs = l.pend[:0], 0, l.hdrs[:0]
}

// forget drops the pending frames of room: its Send ended early, and the pages they
// point at go back to the caller (decode fails the room anyway). Pending entries are
// (header, payload) pairs: control messages never stay pending.
func (l *link) forget(room uint64) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	kept := l.pend[:0]
	for i := 0; i+1 < len(l.pend); i += 2 {
		if binary.BigEndian.Uint64(l.pend[i][4:]) == room {
			l.pendBytes -= len(l.pend[i+1])
			continue
		}
		kept = append(kept, l.pend[i], l.pend[i+1])
	}
	clear(l.pend[len(kept):])
	l.pend = kept
}

// writeFrame queues a page frame (header, then payload, which is not copied) and writes
// the batch out when it is full; otherwise it leaves with the next control message, the
// next heartbeat, or the Send's final flush. With corrupt, a copy of the payload with one
// byte flipped is sent under the original CRC.
func (l *link) writeFrame(h *Header, payload []byte, corrupt bool) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.err(); err != nil {
		l.dropLocked()
		return err
	}
	if corrupt && len(payload) > 0 {
		payload = append([]byte(nil), payload...) // its own copy: it stays pending
		payload[len(payload)/2] ^= 0x5a
	}
	var err error
	if len(l.hdrs)+HeaderSize > cap(l.hdrs) {
		err = l.flushLocked()
	}
	if err == nil {
		n := len(l.hdrs)
		l.hdrs = l.hdrs[:n+HeaderSize]
		hb := l.hdrs[n : n+HeaderSize : n+HeaderSize]
		h.Put(hb)
		l.pend = append(l.pend, hb, payload)
		l.pendBytes += len(payload)
		if l.pendBytes >= flushBytes {
			err = l.flushLocked()
		}
	}
	if err != nil {
		err = fmt.Errorf("%w: write frame to %s: %w", ErrConnection, l.peer, err)
		l.kill(err)
	}
	return err
}

// read reads the next message. The deadline is the idle timeout: heartbeats arrive well
// within it on a live connection. The body is valid until the next read.
func (l *link) read(buf []byte) (Header, []byte, []byte, error) {
	if l.skip > 0 {
		_, _ = l.br.Discard(l.skip) // buffered already: no I/O
		l.skip = 0
	}
	_ = l.c.SetReadDeadline(time.Now().Add(l.cfg.idleTimeout))
	h, body, buf, err := l.readMsg(buf)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			err = fmt.Errorf("%w: nothing from %s for %s (heartbeats lost): %w", ErrTimeout, l.peer, l.cfg.idleTimeout, err)
		} else if !errors.Is(err, ErrProtocol) {
			err = fmt.Errorf("%w: read from %s: %w", ErrConnection, l.peer, err)
		}
	}
	return h, body, buf, err
}

// readMsg is readMessage, except that a body that fits in br is returned in place.
func (l *link) readMsg(buf []byte) (Header, []byte, []byte, error) {
	h, err := readHeader(l.br, l.maxPage)
	if err != nil {
		return h, nil, buf, err
	}
	if int(h.Len) > l.br.Size() {
		if cap(buf) < int(h.Len) {
			buf = make([]byte, h.Len)
		}
		body := buf[:h.Len]
		if _, err := io.ReadFull(l.br, body); err != nil {
			return h, nil, buf, bodyErr(err)
		}
		return h, body, buf, verifyControl(h, body)
	}
	body, err := l.br.Peek(int(h.Len))
	if err != nil {
		return h, nil, buf, bodyErr(err)
	}
	l.skip = len(body)
	return h, body, buf, verifyControl(h, body)
}
