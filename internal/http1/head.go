package http1

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

const (
	// headBuffer is the buffer a response head is read into; it grows to MaxHead.
	headBuffer = 1 << 10
	// MaxHead bounds a response head (status line and headers).
	MaxHead = 64 << 10
	// maxChunkLine bounds a chunk-size line with its extensions, as net/http does.
	maxChunkLine = 4 << 10
)

// Errors of the wire format.
var (
	// ErrHeadTooLarge is a response head over MaxHead.
	ErrHeadTooLarge = fmt.Errorf("http1: response head over %d KiB", MaxHead>>10)
	// ErrMalformed is a response that breaks RFC 9112's syntax (status line, header
	// line, Content-Length, chunked framing).
	ErrMalformed = errors.New("http1: malformed response")
	// ErrObsFold is a header continued on the next line (obsolete line folding, RFC
	// 9112 §5.2): rejected, as no server of this decade sends it on purpose.
	ErrObsFold = fmt.Errorf("%w: obsolete line folding in a header", ErrMalformed)
	// ErrConnectionLost is a body cut off before its end (EOF or reset before the
	// chunked terminator or the Content-Length): an abrupt end, not a clean one.
	ErrConnectionLost = errors.New("http1: connection lost before the end of the response")
	// ErrNoResponse is a connection that ended (EOF or reset) before any byte of the
	// response arrived.
	ErrNoResponse = errors.New("http1: connection closed before any byte of the response")
)

// Head is what the clients use of a response head.
type Head struct {
	Status          int
	Close           bool  // the connection ends with this response
	Chunked         bool  // Transfer-Encoding: chunked
	Length          int64 // Content-Length; -1 when absent
	ContentType     string
	ContentEncoding string // as sent ("" for none)
	RetryAfter      string
}

// ReadResponse reads a response head from nc (skipping 1xx interim answers) and returns
// it with a body reader positioned at the body's first byte. A connection that ends
// before any byte arrived wraps ErrNoResponse.
func ReadResponse(nc net.Conn) (Head, *Body, error) {
	// Not pooled: a burst reads thousands of heads at once, and a pool would keep that
	// many buffers past the burst; this one is garbage once the stream has read its bytes.
	return readResponse(nc, make([]byte, headBuffer), false)
}

// headPool holds head buffers of ReadResponsePooled (*[]byte of len headBuffer).
var headPool sync.Pool

// ReadResponsePooled is ReadResponse with a head buffer taken from a pool and given back
// once the body has used the bytes read along with the head: for a caller that reads
// many short answers and holds none (the router's legs, two per request), not for one
// that holds thousands of streams at once (a pool would keep their buffers past a burst).
func ReadResponsePooled(nc net.Conn) (Head, *Body, error) {
	bp, _ := headPool.Get().(*[]byte)
	if bp == nil || len(*bp) != headBuffer {
		bp = new([]byte)
		*bp = make([]byte, headBuffer)
	}
	h, b, err := readResponse(nc, *bp, true)
	if err != nil {
		headPool.Put(bp) // nothing refers to it: the head's values are copies
	}
	return h, b, err
}

func readResponse(nc net.Conn, buf []byte, pooled bool) (Head, *Body, error) {
	n, seen := 0, false
	for {
		end := headEnd(buf[:n])
		if end < 0 {
			if n == len(buf) {
				if len(buf) >= MaxHead {
					return Head{}, nil, ErrHeadTooLarge
				}
				nb := make([]byte, 2*len(buf))
				copy(nb, buf[:n])
				buf = nb
			}
			m, err := nc.Read(buf[n:])
			n += m
			if err != nil && headEnd(buf[:n]) < 0 {
				switch {
				case n == 0 && !seen && (errors.Is(err, io.EOF) || isReset(err)):
					err = fmt.Errorf("%w: %w", ErrNoResponse, err)
				case errors.Is(err, io.EOF):
					err = fmt.Errorf("%w: %w", ErrConnectionLost, io.ErrUnexpectedEOF)
				}
				return Head{}, nil, err
			}
			continue
		}
		h, err := ParseHead(buf[:end])
		if err != nil {
			return Head{}, nil, err
		}
		if h.Status >= 100 && h.Status < 200 && h.Status != 101 {
			n, seen = copy(buf, buf[end:n]), true // an interim answer: the real one follows
			continue
		}
		b := &Body{nc: nc, lb: &buf, lo: end, hi: n, chunked: h.Chunked, remain: h.Length, pooled: pooled && len(buf) == headBuffer}
		switch {
		case h.Status == 204 || h.Status == 304 || h.Status == 101:
			b.chunked, b.remain = false, 0
		case h.Chunked:
		case h.Length < 0:
			h.Close = true // the body runs to the connection's end
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

func malformed(what string, b []byte) error {
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Errorf("%w: %s %q", ErrMalformed, what, s)
}

// ParseHead parses a status line and the headers the clients use. It works on the
// bytes: the few values kept are copied out, so the head itself does not stay alive.
func ParseHead(b []byte) (Head, error) {
	h := Head{Length: -1}
	next := func() []byte {
		l, rest, _ := bytes.Cut(b, []byte("\n"))
		b = rest
		return bytes.TrimSuffix(l, []byte("\r"))
	}
	st := next()
	if len(st) < 12 || !bytes.HasPrefix(st, []byte("HTTP/1.")) || st[7] < '0' || st[7] > '9' || st[8] != ' ' || (len(st) > 12 && st[12] != ' ') {
		return h, malformed("status line", st)
	}
	code := 0
	for _, c := range st[9:12] {
		if c < '0' || c > '9' {
			return h, malformed("status code", st[9:12])
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return h, malformed("status code", st[9:12])
	}
	h.Status = code
	http10 := st[7] == '0'
	keepAlive, sawLength := false, false
	for len(b) > 0 {
		l := next()
		if len(l) == 0 {
			break // the blank line that ends the head
		}
		if l[0] == ' ' || l[0] == '\t' {
			return h, ErrObsFold
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || !validName(name) {
			return h, malformed("header line", l)
		}
		value = bytes.Trim(value, " \t")
		switch {
		case equalFold(name, "Content-Length"):
			v, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || v < 0 || value[0] == '+' || (sawLength && v != h.Length) {
				return h, malformed("Content-Length", value)
			}
			h.Length, sawLength = v, true
		case equalFold(name, "Transfer-Encoding"):
			if http10 {
				continue // chunked is HTTP/1.1's: an HTTP/1.0 body runs to the close
			}
			if !equalFold(value, "chunked") {
				return h, malformed("transfer coding (only chunked is supported)", value)
			}
			h.Chunked = true
		case equalFold(name, "Connection"):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				switch tok = bytes.TrimSpace(tok); {
				case equalFold(tok, "close"):
					h.Close = true
				case equalFold(tok, "keep-alive"):
					keepAlive = true
				}
			}
		case equalFold(name, "Content-Type"):
			if h.ContentType == "" {
				h.ContentType = string(value)
			}
		case equalFold(name, "Content-Encoding"):
			if h.ContentEncoding == "" {
				h.ContentEncoding = string(value)
			} else if len(value) > 0 {
				h.ContentEncoding += ", " + string(value)
			}
		case equalFold(name, "Retry-After"):
			if h.RetryAfter == "" {
				h.RetryAfter = string(value)
			}
		}
	}
	if h.Chunked {
		h.Length = -1 // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length
	}
	if http10 && !keepAlive {
		h.Close = true
	}
	return h, nil
}

func validName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !isTchar(c) {
			return false
		}
	}
	return true
}

// equalFold is ASCII case-insensitive equality of b and s (as net/http's, no Unicode
// folding); b is the wire's bytes or a string cut from them.
func equalFold[T string | []byte](b T, s string) bool {
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

// EqualFold is ASCII case-insensitive equality of b and s.
func EqualFold(b []byte, s string) bool { return equalFold(b, s) }
