package kvtransfer

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// link is one TCP connection of either side. Control messages are queued and written by
// the link's writer goroutine (which also sends heartbeats), so a reader never blocks on a
// write; page frames are written synchronously by the sending goroutine. Every write holds
// wmu and carries a write deadline of frameTimeout.
type link struct {
	c    net.Conn
	cfg  *config
	peer string
	br   *bufio.Reader
	// maxPage bounds the body of a page frame this side accepts (0 on the sender).
	maxPage uint32

	wmu     sync.Mutex
	bw      *bufio.Writer // under wmu; page frames are flushed with the next control message
	scratch []byte        // corrupted copies of payloads (under wmu)

	qmu    sync.Mutex
	q      [][]byte
	notify chan struct{}

	dead    chan struct{}
	once    sync.Once
	deadErr error // set before dead is closed
}

func newLink(c net.Conn, cfg *config) *link {
	return &link{c: c, cfg: cfg, peer: c.RemoteAddr().String(), br: bufio.NewReaderSize(c, 256<<10),
		bw: bufio.NewWriterSize(c, 256<<10), notify: make(chan struct{}, 1), dead: make(chan struct{})}
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

// write writes one encoded message with the frame deadline.
func (l *link) write(msg []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.err(); err != nil {
		return err
	}
	_ = l.c.SetWriteDeadline(time.Now().Add(l.cfg.frameTimeout))
	if _, err := l.bw.Write(msg); err != nil {
		return err
	}
	return l.bw.Flush()
}

// writeFrame buffers a page frame: the header, then payload (the buffer is written out
// when full or by the next control message). With corrupt, a copy of the
// payload with one byte flipped is sent under the original CRC.
func (l *link) writeFrame(h *Header, payload []byte, corrupt bool) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.err(); err != nil {
		return err
	}
	var hb [HeaderSize]byte
	h.Put(hb[:])
	if corrupt && len(payload) > 0 {
		l.scratch = append(l.scratch[:0], payload...)
		l.scratch[len(l.scratch)/2] ^= 0x5a
		payload = l.scratch
	}
	_ = l.c.SetWriteDeadline(time.Now().Add(l.cfg.frameTimeout))
	_, err := l.bw.Write(hb[:])
	if err == nil {
		_, err = l.bw.Write(payload)
	}
	if err != nil {
		err = fmt.Errorf("%w: write frame to %s: %w", ErrConnection, l.peer, err)
		l.kill(err)
	}
	return err
}

// read reads the next message. The deadline is the idle timeout: heartbeats arrive well
// within it on a live connection.
func (l *link) read(buf []byte) (Header, []byte, []byte, error) {
	_ = l.c.SetReadDeadline(time.Now().Add(l.cfg.idleTimeout))
	h, body, buf, err := readMessage(l.br, buf, l.maxPage)
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
