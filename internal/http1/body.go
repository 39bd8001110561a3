package http1

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Chunked decoder states.
const (
	csSize = iota
	csSizeWS
	csExt
	csSizeLF
	csData
	csDataCR
	csDataLF
	csTrailerStart
	csTrailerLine
	csTrailerLF
)

// errBadChunk is a chunked framing that breaks RFC 9112 §7.1.
var errBadChunk = fmt.Errorf("%w: chunked encoding", ErrMalformed)

// Body reads one response body: first the bytes read along with the head (lb[lo:hi]),
// then the socket. Chunked bodies are decoded in place in the caller's buffer, so a held
// stream keeps no read buffer of its own once the head's bytes are used up. Read returns
// io.EOF at a clean end and an error wrapping ErrConnectionLost at an abrupt one.
type Body struct {
	nc     net.Conn
	lb     *[]byte // head buffer while it still holds body bytes; nil after
	lo, hi int
	pooled bool // lb goes back to headPool when it is let go

	chunked bool
	remain  int64 // identity: bytes left (-1: to EOF); chunked: bytes left in this chunk
	st      uint8
	size    int64
	digits  int
	line    int // bytes of the current chunk-size line

	eof   bool
	extra bool  // bytes arrived past the body's end: the connection is out of step
	err   error // sticky
}

// settle lets the head buffer go once its bytes are used.
func (b *Body) settle() {
	if b.lb != nil && b.lo >= b.hi {
		if b.pooled {
			headPool.Put(b.lb) // nothing else refers to it: raw copied its bytes out
		}
		b.lb = nil
	}
}

// raw reads body bytes, buffered ones first.
func (b *Body) raw(p []byte) (int, error) {
	if b.lb != nil {
		n := copy(p, (*b.lb)[b.lo:b.hi])
		b.lo += n
		b.settle()
		return n, nil
	}
	return b.nc.Read(p)
}

// WaitReadable waits (holding no buffer) until a Read would not block (an
// sse.ReadableWaiter).
func (b *Body) WaitReadable() error {
	if b.lb != nil || b.eof || b.err != nil {
		return nil
	}
	return WaitReadable(b.nc)
}

// Done reports whether the body ended cleanly with nothing after it: the connection
// may carry another request.
func (b *Body) Done() bool { return b.eof && !b.extra && b.lb == nil }

// Clean reports whether the body reached its end (the terminator, the length, or the
// close that delimits it).
func (b *Body) Clean() bool { return b.eof }

// Drain reads what is left of the body for at most grace (at most limit bytes), so the
// connection can be reused; it reports whether the body ended cleanly with nothing after.
func (b *Body) Drain(grace time.Duration, limit int64) bool {
	_ = b.nc.SetReadDeadline(time.Now().Add(grace))
	_, err := io.Copy(io.Discard, io.LimitReader(b, limit))
	if err == nil && !b.eof {
		// At the limit: one more read says whether that was the end, under the same
		// deadline (a peer that sent exactly limit bytes and holds on would hold it forever).
		var one [1]byte
		_, _ = b.Read(one[:])
	}
	_ = b.nc.SetReadDeadline(time.Time{})
	return b.Done()
}

func (b *Body) Read(p []byte) (int, error) {
	for {
		if b.err != nil {
			return 0, b.err
		}
		if b.eof {
			if b.lb != nil {
				b.extra = true // unread bytes past the body
			}
			return 0, io.EOF
		}
		if len(p) == 0 {
			return 0, nil
		}
		q := p
		if !b.chunked && b.remain >= 0 && int64(len(q)) > b.remain {
			q = q[:b.remain]
		}
		n, err := b.raw(q)
		w := n
		switch {
		case b.chunked:
			w = b.dechunk(q[:n])
		case b.remain >= 0:
			b.remain -= int64(n)
			b.eof = b.remain == 0
		case err == io.EOF:
			b.eof = true // a body delimited by the connection's end
		}
		if err != nil && !b.eof && b.err == nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			b.err = fmt.Errorf("%w: %w", ErrConnectionLost, err)
		}
		if w > 0 {
			return w, nil
		}
	}
}

func unhex(c byte) (int64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return int64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return int64(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return int64(c-'A') + 10, true
	}
	return 0, false
}

// dechunk decodes p in place and returns how many data bytes it left at p's start.
func (b *Body) dechunk(p []byte) int {
	w := 0
	for i := 0; i < len(p); {
		if b.eof {
			b.extra = true
			return w
		}
		c := p[i]
		if b.st <= csSizeLF {
			if b.line++; b.line > maxChunkLine {
				b.err = errBadChunk
				return w
			}
		}
		switch b.st {
		case csSize:
			if v, ok := unhex(c); ok {
				if b.digits == 15 {
					b.err = errBadChunk
					return w
				}
				b.size, b.digits = b.size<<4|v, b.digits+1
				i++
				continue
			}
			if b.digits == 0 {
				b.err = errBadChunk
				return w
			}
			b.st = csSizeWS
		case csSizeWS:
			switch c {
			case ' ', '\t':
			case ';':
				b.st = csExt
			case '\r':
				b.st = csSizeLF
			default: // a bare LF too: as net/http, since the request-smuggling fixes
				b.err = errBadChunk
				return w
			}
			i++
		case csExt:
			switch c {
			case '\r':
				b.st = csSizeLF
			case '\n':
				b.err = errBadChunk
				return w
			}
			i++
		case csSizeLF:
			if c != '\n' {
				b.err = errBadChunk
				return w
			}
			b.endSizeLine()
			i++
		case csData:
			k := int(min(int64(len(p)-i), b.remain))
			copy(p[w:], p[i:i+k])
			w, i, b.remain = w+k, i+k, b.remain-int64(k)
			if b.remain == 0 {
				b.st = csDataCR
			}
		case csDataCR:
			if c != '\r' { // net/http too wants exactly CRLF after chunk data
				b.err = errBadChunk
				return w
			}
			b.st = csDataLF
			i++
		case csDataLF:
			if c != '\n' {
				b.err = errBadChunk
				return w
			}
			b.st = csSize
			i++
		case csTrailerStart:
			switch c {
			case '\r':
				b.st = csTrailerLF
			case '\n': // net/http wants the body's last line to be CRLF (FuzzReadResponseAgainstNetHTTP)
				b.err = errBadChunk
				return w
			default:
				b.st = csTrailerLine
			}
			i++
		case csTrailerLine:
			if c == '\n' {
				b.st = csTrailerStart
			}
			i++
		case csTrailerLF:
			if c != '\n' {
				b.err = errBadChunk
				return w
			}
			b.eof = true
			i++
		}
	}
	return w
}

// endSizeLine starts the chunk whose size line just ended (0: the trailer follows).
func (b *Body) endSizeLine() {
	if b.size == 0 {
		b.st = csTrailerStart
	} else {
		b.st, b.remain = csData, b.size
	}
	b.size, b.digits, b.line = 0, 0, 0
}
