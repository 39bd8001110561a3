package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Writer appends events to events.jsonl. It is safe for concurrent use; events are
// written in the order Emit is called, flushed every FlushInterval and on Close.
type Writer struct {
	mu      sync.Mutex
	f       *os.File
	w       *bufio.Writer
	onEvent func(Event)
	err     error
	failed  chan struct{} // closed when err is first set (Failed)
	closed  bool
	stop    chan struct{}
	done    chan struct{}
	// viaJSON makes every line go through encoding/json: the benchmarks' baseline.
	viaJSON bool
}

// lineEncoder is one JSON encoder writing into its own buffer, for the events
// appendEvent leaves to encoding/json; line holds what appendEvent writes.
type lineEncoder struct {
	line []byte
	buf  bytes.Buffer
	enc  *json.Encoder
}

var encPool = sync.Pool{New: func() any {
	e := &lineEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// FlushInterval is how often a Writer flushes to disk during a run.
const FlushInterval = time.Second

// Create truncates or creates the ledger file at path. onEvent (may be nil) sees every
// event as it is written; it is called from the emitting goroutine and must be cheap.
func Create(path string, onEvent func(Event)) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: create: %w", err)
	}
	l := &Writer{f: f, w: bufio.NewWriterSize(f, 256<<10), onEvent: onEvent,
		failed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.flusher()
	return l, nil
}

func (l *Writer) flusher() {
	defer close(l.done)
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.mu.Lock()
			if !l.closed && l.err == nil {
				l.fail(l.w.Flush())
			}
			l.mu.Unlock()
		}
	}
}

// Emit writes ev (stamping Time when unset) and passes it to the onEvent callback.
// Events emitted after Close are dropped.
func (l *Writer) Emit(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	// Encode outside the lock: many requests finish at once, and encoding dominates. A
	// pooled buffer: no allocation for the line itself. appendEvent writes what
	// encoding/json would (Encode: json.Marshal's bytes, then the newline).
	enc := encPool.Get().(*lineEncoder)
	line, merr := enc.encode(&ev, l.viaJSON)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		encPool.Put(enc)
		return
	}
	if l.err == nil {
		l.fail(merr)
	}
	if l.err == nil {
		_, err := l.w.Write(line)
		l.fail(err)
	}
	cb := l.onEvent
	l.mu.Unlock()
	if enc.buf.Cap() <= 64<<10 && cap(enc.line) <= 64<<10 {
		encPool.Put(enc) // a huge line's buffer is not kept
	}
	if cb != nil {
		cb(ev)
	}
}

// encode writes ev's line into e's buffers: by appendEvent, or encoding/json for what
// appendEvent leaves to it.
func (e *lineEncoder) encode(ev *Event, viaJSON bool) ([]byte, error) {
	if !viaJSON {
		if line, ok := appendEvent(e.line[:0], ev); ok {
			e.line = line
			return line, nil
		}
	}
	e.buf.Reset()
	// A copy for encoding/json, so that ev (Emit's argument, ~600 bytes) stays on the
	// stack on appendEvent's path: Encode takes an interface, which moves it to the heap.
	cp := new(Event)
	*cp = *ev
	err := e.enc.Encode(cp)
	return e.buf.Bytes(), err
}

// Flush writes what is buffered to the file, so a reader sees every event emitted so far.
func (l *Writer) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && l.err == nil {
		l.fail(l.w.Flush())
	}
	if l.err != nil {
		return fmt.Errorf("ledger: %w", l.err)
	}
	return nil
}

// fail records err (nil: nothing) as the writer's error, the first one only; l.mu held.
func (l *Writer) fail(err error) {
	if err != nil && l.err == nil {
		l.err = err
		close(l.failed)
	}
}

// Failed is closed once the ledger cannot be written (a full disk, an I/O error): every
// event after that is lost, so a run that goes on can no longer be judged (Err says why).
func (l *Writer) Failed() <-chan struct{} { return l.failed }

// Err is the first error the ledger met (nil: none).
func (l *Writer) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("ledger: %w", l.err)
	}
	return nil
}

// Close flushes and closes the file; later emits are dropped.
func (l *Writer) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return l.err
	}
	l.closed = true
	err := l.err
	if ferr := l.w.Flush(); err == nil {
		err = ferr
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}
