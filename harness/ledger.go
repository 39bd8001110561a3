package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"pdsoak/reports"
)

// ledger appends events to events.jsonl. It is safe for concurrent use; events are
// written in the order emit is called, flushed every FlushInterval and on Close.
type ledger struct {
	mu      sync.Mutex
	f       *os.File
	w       *bufio.Writer
	onEvent func(reports.Event)
	err     error
	closed  bool
	stop    chan struct{}
	done    chan struct{}
	count   int
}

// FlushInterval is how often the ledger is flushed to disk during a run.
var FlushInterval = time.Second

func openLedger(path string, onEvent func(reports.Event)) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("harness: open ledger: %w", err)
	}
	l := &ledger{f: f, w: bufio.NewWriterSize(f, 256<<10), onEvent: onEvent,
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.flusher()
	return l, nil
}

func (l *ledger) flusher() {
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
				l.err = l.w.Flush()
			}
			l.mu.Unlock()
		}
	}
}

// emit writes ev (stamping Time when unset) and passes it to the OnEvent callback.
func (l *ledger) emit(ev reports.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	// Encode outside the lock: many requests finish at once, and encoding dominates.
	line, merr := json.Marshal(&ev)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if l.err == nil {
		l.err = merr
	}
	if l.err == nil {
		l.w.Write(line)
		l.err = l.w.WriteByte('\n')
	}
	l.count++
	cb := l.onEvent
	l.mu.Unlock()
	if cb != nil {
		cb(ev)
	}
}

// Close flushes and closes the file; later emits are dropped.
func (l *ledger) Close() error {
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
		return fmt.Errorf("harness: ledger: %w", err)
	}
	return nil
}
