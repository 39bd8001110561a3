package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
)

// The wire side of the h1 transport: a response head parsed from a pooled buffer, and
// a body that reads the socket directly (dechunking in place), so a held stream keeps
// no read buffer of its own once the bytes that came with the head are used up (the
// SSE reader above it has one). net/http's ReadResponse keeps a bufio.Reader, a header
// map, a transfer reader and a chunked reader alive for every stream.

const (
	// headBuffer is the buffer a response head is read into; it grows to maxHead.
	headBuffer = 1 << 10
	// maxHead bounds a response head (status line and headers).
	maxHead = 64 << 10
	// maxChunkLine bounds a chunk-size line with its extensions, as net/http does.
	maxChunkLine = 4 << 10
)

// Errors of the wire format; a transport error for the classifier, as net/http's are.
var (
	errHeadTooLarge = errors.New("client: response head over 64 KiB")
	errBadChunk     = errors.New("client: malformed chunked encoding")
)

// respHead is what the client uses of a response head.
type respHead struct {
	status      int
	close       bool // the connection ends with this response
	chunked     bool
	length      int64 // Content-Length; -1 when absent
	contentType string
	retryAfter  string
}

// readResponse reads a response head from nc (skipping 1xx interim answers) and returns
// it with a body reader positioned at the body's first byte.
func readResponse(nc net.Conn) (respHead, *h1Body, error) {
	// Not pooled: a burst reads thousands of heads at once, and a pool would keep that
	// many buffers past the burst; this one is garbage once the stream has read its bytes.
	buf, n := make([]byte, headBuffer), 0
	for {
		end := headEnd(buf[:n])
		if end < 0 {
			if n == len(buf) {
				if len(buf) >= maxHead {
					return respHead{}, nil, errHeadTooLarge
				}
				nb := make([]byte, 2*len(buf))
				copy(nb, buf[:n])
				buf = nb
			}
			m, err := nc.Read(buf[n:])
			n += m
			if err != nil && headEnd(buf[:n]) < 0 {
				if errors.Is(err, io.EOF) && n > 0 {
					err = io.ErrUnexpectedEOF
				}
				return respHead{}, nil, err
			}
			continue
		}
		h, err := parseHead(buf[:end])
		if err != nil {
			return respHead{}, nil, err
		}
		if h.status >= 100 && h.status < 200 && h.status != 101 {
			n = copy(buf, buf[end:n]) // an interim answer: the real one follows
			continue
		}
		b := &h1Body{nc: nc, lb: &buf, lo: end, hi: n, chunked: h.chunked, remain: h.length}
		switch {
		case h.status == 204 || h.status == 304 || h.status == 101:
			b.chunked, b.remain = false, 0
		case h.chunked:
		case h.length < 0:
			h.close = true // the body runs to the connection's end
		}
		if !b.chunked && b.remain == 0 {
			b.eof = true
		}
		b.settle()
		return h, b, nil
	}
}

// headEnd returns the index just past the blank line ending a head in b, or -1.
func headEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		line := b[i : i+j]
		i += j + 1
		if len(line) == 0 || (len(line) == 1 && line[0] == '\r') {
			return i
		}
	}
}

// parseHead parses a status line and the headers the client uses. It works on the
// bytes: the few values kept are copied out, so the head itself does not stay alive.
func parseHead(b []byte) (respHead, error) {
	h := respHead{length: -1}
	next := func() []byte {
		l, rest, _ := bytes.Cut(b, []byte("\n"))
		b = rest
		return bytes.TrimSuffix(l, []byte("\r"))
	}
	st := next()
	if len(st) < 12 || !bytes.HasPrefix(st, []byte("HTTP/1.")) || st[8] != ' ' || (len(st) > 12 && st[12] != ' ') {
		return h, fmt.Errorf("client: malformed HTTP status line %q", trim(string(st)))
	}
	code := 0
	for _, c := range st[9:12] {
		if c < '0' || c > '9' {
			return h, fmt.Errorf("client: malformed HTTP status code %q", st[9:12])
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return h, fmt.Errorf("client: malformed HTTP status code %q", st[9:12])
	}
	h.status = code
	http10 := st[7] == '0'
	keepAlive, sawLength := false, false
	for len(b) > 0 {
		l := next()
		if len(l) == 0 {
			break // the blank line that ends the head
		}
		if l[0] == ' ' || l[0] == '\t' {
			continue // obsolete line folding: part of a header the client ignores
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || !validHeaderName(string(name)) {
			return h, fmt.Errorf("client: malformed header line %q", trim(string(l)))
		}
		value = bytes.Trim(value, " \t")
		switch {
		case equalFold(name, "Content-Length"):
			v, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || v < 0 || (sawLength && v != h.length) {
				return h, fmt.Errorf("client: bad Content-Length %q", trim(string(value)))
			}
			h.length, sawLength = v, true
		case equalFold(name, "Transfer-Encoding"):
			if !equalFold(value, "chunked") {
				return h, fmt.Errorf("client: unsupported transfer encoding %q", trim(string(value)))
			}
			h.chunked = true
		case equalFold(name, "Connection"):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				switch tok = bytes.TrimSpace(tok); {
				case equalFold(tok, "close"):
					h.close = true
				case equalFold(tok, "keep-alive"):
					keepAlive = true
				}
			}
		case equalFold(name, "Content-Type"):
			if h.contentType == "" {
				h.contentType = string(value)
			}
		case equalFold(name, "Retry-After"):
			if h.retryAfter == "" {
				h.retryAfter = string(value)
			}
		}
	}
	if h.chunked {
		h.length = -1
	}
	if http10 && !keepAlive {
		h.close = true
	}
	return h, nil
}

// equalFold is ASCII case-insensitive equality of b and s.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

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

// h1Body reads one response body: first the bytes read along with the head (lb[lo:hi]),
// then the socket. Chunked bodies are decoded in place in the caller's buffer.
type h1Body struct {
	nc     net.Conn
	lb     *[]byte // pooled head buffer while it still holds body bytes; nil after
	lo, hi int

	chunked bool
	remain  int64 // identity: bytes left (-1: to EOF); chunked: bytes left in this chunk
	st      uint8
	size    int64
	digits  int
	line    int // bytes of the current chunk-size line

	eof     bool
	extra   bool  // bytes arrived past the body's end: the connection is out of step
	drained bool  // the last socket read took less than it could: nothing was left
	err     error // sticky
}

// settle lets the head buffer go once its bytes are used.
func (b *h1Body) settle() {
	if b.lb != nil && b.lo >= b.hi {
		b.lb = nil
	}
}

// raw reads body bytes, buffered ones first.
func (b *h1Body) raw(p []byte) (int, error) {
	if b.lb != nil {
		n := copy(p, (*b.lb)[b.lo:b.hi])
		b.lo += n
		b.settle()
		return n, nil
	}
	return b.nc.Read(p)
}

// WaitReadable waits (holding no buffer) until a Read would not block.
func (b *h1Body) WaitReadable() error {
	if b.lb != nil || b.eof || b.err != nil {
		return nil
	}
	return waitReadable(b.nc)
}

// h1Stream is a stream body for the SSE reader: counted, and able to wait for input
// without a buffer (sse.ReadableWaiter).
type h1Stream struct {
	*countingReader
	b *h1Body
}

func (s h1Stream) WaitReadable() error { return s.b.WaitReadable() }

// done reports whether the body ended cleanly with nothing after it.
func (b *h1Body) done() bool { return b.eof && !b.extra && b.lb == nil }

func (b *h1Body) Read(p []byte) (int, error) {
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
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
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
func (b *h1Body) dechunk(p []byte) int {
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
			case '\n':
				b.endSizeLine()
			default:
				b.err = errBadChunk
				return w
			}
			i++
		case csExt:
			if c == '\n' {
				b.endSizeLine()
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
			case '\n':
				b.eof = true
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
func (b *h1Body) endSizeLine() {
	if b.size == 0 {
		b.st = csTrailerStart
	} else {
		b.st, b.remain = csData, b.size
	}
	b.size, b.digits, b.line = 0, 0, 0
}
