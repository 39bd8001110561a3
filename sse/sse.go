package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// DefaultMaxLine bounds one line (and one event's data) in bytes.
const DefaultMaxLine = 4 << 20

// ErrLineTooLong is returned when a line or an event's data exceeds the limit.
var ErrLineTooLong = errors.New("sse: line too long")

// ErrUnexpectedEOF is returned when the stream ends in the middle of an event
// (data received but no blank line dispatched it).
var ErrUnexpectedEOF = errors.New("sse: stream ended inside an event")

// Event is one dispatched event or one comment line.
type Event struct {
	// Comment is true for a comment line (": ping"); only Text is set then.
	Comment bool
	// Text is the comment's text without the leading ':' (and one optional space).
	Text string
	// Type is the "event:" field; empty means the default type "message".
	Type string
	// Data is the "data:" lines joined with "\n".
	Data string
	// ID is the last "id:" field seen in this event, if any.
	ID string
	// Retry is the "retry:" field in milliseconds, or -1 when absent or invalid.
	Retry int
}

// Reader parses events from an io.Reader.
type Reader struct {
	src     io.Reader
	buf     []byte
	start   int // first unconsumed byte of buf
	end     int // end of valid bytes in buf
	maxLine int
	bufSize int
	bp      *[]byte // the pool's pointer for buf, reused when buf goes back
	skipLF  bool    // the previous line ended in CR: a following LF belongs to it
	err     error
	first   bool
	// current event under construction
	data    bytes.Buffer
	hasData bool
	evType  string
	id      string
	retry   int
	inEvent bool
}

// Option configures a Reader.
type Option func(*Reader)

// WithMaxLine sets the maximum line and event data size in bytes.
func WithMaxLine(n int) Option {
	return func(r *Reader) {
		if n > 0 {
			r.maxLine = n
		}
	}
}

// DefaultBufferSize is a Reader's initial buffer; it grows (doubling) to hold a longer
// line, up to the line limit.
const DefaultBufferSize = 1024

// WithBufferSize sets the initial buffer size (at least 16 bytes). Readers that hold many
// idle streams at once use a small one: most events are a few hundred bytes.
func WithBufferSize(n int) Option {
	return func(r *Reader) { r.bufSize = max(n, 16) }
}

// ReadableWaiter is a source that can wait for input without a buffer (a socket). A
// Reader over one gives its buffer back to a shared pool while it waits with nothing
// buffered, so thousands of idle streams hold no read buffer between events.
type ReadableWaiter interface {
	// WaitReadable returns once a Read would not block (data, end or error), or with
	// the error that ended the wait.
	WaitReadable() error
}

var bufPool sync.Pool // *[]byte

// release gives an idle buffer back to the pool (a grown one is dropped).
func (r *Reader) release() {
	if r.buf != nil && len(r.buf) == r.bufSize {
		if r.bp == nil {
			r.bp = new([]byte)
		}
		*r.bp = r.buf
		bufPool.Put(r.bp)
		r.bp = nil
	}
	r.buf = nil
}

// acquire takes a buffer of the reader's size from the pool or makes one.
func (r *Reader) acquire() {
	if bp, ok := bufPool.Get().(*[]byte); ok && len(*bp) == r.bufSize {
		r.buf, r.bp = *bp, bp
		return
	}
	r.buf = make([]byte, r.bufSize)
}

// NewReader returns a Reader over src.
func NewReader(src io.Reader, opts ...Option) *Reader {
	r := &Reader{src: src, maxLine: DefaultMaxLine, bufSize: DefaultBufferSize, first: true, retry: -1}
	for _, o := range opts {
		o(r)
	}
	// The buffer is taken (from the pool) by the first read: a Reader that is
	// Released after its stream reuses another's instead of making its own.
	return r
}

// ErrReleased is returned by a Reader used after Release.
var ErrReleased = errors.New("sse: reader released")

// Release gives the reader's buffer back to the shared pool for the next Reader of
// the same buffer size: a caller that reads many short streams one after another
// (the router's legs) then allocates no buffer per stream. The Reader is done: data
// it had buffered is dropped and later calls return ErrReleased. Event strings from
// Next stay valid (they are copies); those from NextView do not.
func (r *Reader) Release() {
	r.release()
	r.start, r.end = 0, 0
	r.err = ErrReleased
}

// Next returns the next comment or dispatched event. It returns io.EOF when the
// stream ends cleanly between events, ErrUnexpectedEOF when it ends inside an event,
// and any read error of the underlying reader otherwise.
func (r *Reader) Next() (Event, error) { return r.next(false) }

// NextView is Next without copying an event's data or a comment's text: Data and Text
// view the reader's own buffers and are valid only until the next call of Next or
// NextView (a caller that keeps any part of them copies it). A held stream's every
// token was one allocation of its whole chunk.
func (r *Reader) NextView() (Event, error) { return r.next(true) }

func (r *Reader) next(view bool) (Event, error) {
	for {
		line, err := r.line()
		if err != nil {
			if err == io.EOF && r.inEvent {
				r.reset()
				return Event{}, ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if !r.inEvent {
				continue
			}
			ev, ok := r.dispatch(view)
			if ok {
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			text := line[1:]
			if len(text) > 0 && text[0] == ' ' {
				text = text[1:]
			}
			return Event{Comment: true, Text: str(text, view), Retry: -1}, nil
		}
		if err := r.field(line); err != nil {
			return Event{}, err
		}
	}
}

func (r *Reader) reset() {
	r.data.Reset()
	r.hasData = false
	r.evType = ""
	r.retry = -1
	r.inEvent = false
}

// dispatch ends the current event. Per the spec, an event without data is not
// dispatched; the id field still persists as the last event id (kept here).
func (r *Reader) dispatch(view bool) (Event, bool) {
	defer r.reset()
	if !r.hasData {
		return Event{}, false
	}
	return Event{Type: r.evType, Data: str(r.data.Bytes(), view), ID: r.id, Retry: r.retry}, true
}

// str is b as a string: a copy, or (view) b's own bytes.
func str(b []byte, view bool) string {
	if view {
		return unsafe.String(unsafe.SliceData(b), len(b))
	}
	return string(b)
}

func (r *Reader) field(line []byte) error {
	r.inEvent = true
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if r.hasData {
			r.data.WriteByte('\n')
		}
		r.data.Write(value)
		r.hasData = true
		if r.data.Len() > r.maxLine {
			return fmt.Errorf("%w: event data over %d bytes", ErrLineTooLong, r.maxLine)
		}
	case "event":
		r.evType = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.id = string(value)
		}
	case "retry":
		if n, err := strconv.Atoi(string(value)); err == nil && n >= 0 && isDigits(value) {
			r.retry = n
		}
	}
	return nil
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// line returns the next line without its terminator. The slice is valid until the
// next call. At the end of input a final unterminated line is returned, then the error.
func (r *Reader) line() ([]byte, error) {
	scanFrom := r.start
	for {
		// Drop the LF of a CRLF whose CR ended the previous line.
		if r.skipLF && r.start < r.end {
			if r.buf[r.start] == '\n' {
				r.start++
			}
			r.skipLF = false
			scanFrom = max(scanFrom, r.start)
		}
		if r.first && r.start < r.end {
			avail := r.buf[r.start:r.end]
			switch {
			case bytes.HasPrefix(avail, bom):
				r.start += len(bom)
				scanFrom = r.start
				r.first = false
			case len(avail) < len(bom) && bytes.HasPrefix(bom, avail) && r.err == nil:
				// Could still be a BOM: read more before deciding.
			default:
				r.first = false
			}
		}
		if !r.skipLF && !r.first {
			if i := bytes.IndexAny(r.buf[scanFrom:r.end], "\r\n"); i >= 0 {
				pos := scanFrom + i
				line := r.buf[r.start:pos]
				r.skipLF = r.buf[pos] == '\r'
				r.start = pos + 1
				return line, nil
			}
			scanFrom = r.end
		}
		if r.err != nil {
			if r.start < r.end {
				line := r.buf[r.start:r.end]
				r.start = r.end
				return line, nil
			}
			return nil, r.err
		}
		if r.end-r.start > r.maxLine {
			return nil, fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.maxLine)
		}
		r.fill(&scanFrom)
	}
}

var bom = []byte("\xef\xbb\xbf")

// fill reads more input, compacting or growing the buffer as needed.
func (r *Reader) fill(scanFrom *int) {
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		*scanFrom -= r.start
		r.end = n
		r.start = 0
	}
	if r.end == 0 {
		if w, ok := r.src.(ReadableWaiter); ok {
			r.release()
			if err := w.WaitReadable(); err != nil {
				r.err = err
				return
			}
		}
	}
	if r.buf == nil {
		r.acquire()
	}
	if r.end == len(r.buf) {
		nb := make([]byte, 2*len(r.buf))
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	for tries := 0; tries < 100; tries++ {
		n, err := r.src.Read(r.buf[r.end:])
		r.end += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// Encode writes ev in wire form (used by tests and fakes). Comments become ": text".
func Encode(w io.Writer, ev Event) error {
	var b strings.Builder
	if ev.Comment {
		b.WriteString(":")
		if ev.Text != "" {
			b.WriteString(" ")
			b.WriteString(ev.Text)
		}
		b.WriteString("\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	if ev.Type != "" {
		b.WriteString("event: " + ev.Type + "\n")
	}
	if ev.ID != "" {
		b.WriteString("id: " + ev.ID + "\n")
	}
	if ev.Retry >= 0 {
		b.WriteString("retry: " + strconv.Itoa(ev.Retry) + "\n")
	}
	for _, l := range strings.Split(ev.Data, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// ReadData reads a whole stream and returns the data of its events in order, skipping
// comments. It returns ErrUnexpectedEOF when the stream ends inside an event, and nil
// at a clean end. For tests and tools that check a complete body; live streams use
// NewReader.
func ReadData(src io.Reader, opts ...Option) ([]string, error) {
	r := NewReader(src, opts...)
	var out []string
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if !ev.Comment {
			out = append(out, ev.Data)
		}
	}
}
