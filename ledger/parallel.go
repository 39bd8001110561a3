package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// ReadParallel is Read with the JSON decoding spread over the machine's cores: one
// goroutine splits lines into batches, workers decode the batches, and fn sees the events
// in ledger order. Decoding is most of the time a report takes (a 1,000,000-event ledger),
// and lines decode independently. It says the same as Read about every input
// (FuzzReadLedger holds it to that): blank lines ignored, a torn last line skipped and
// reported, a bad line elsewhere an error naming its line number.
func ReadParallel(r io.Reader, fn func(Event) error) (ReadStats, error) {
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 {
		return Read(r, fn)
	}
	done := make(chan struct{})
	defer close(done)
	jobs := make(chan *lineBatch, workers)
	ordered := make(chan *lineBatch, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range jobs {
				b.decode()
				close(b.ready)
			}
		})
	}
	go func() {
		defer wg.Wait()
		defer close(jobs)
		defer close(ordered)
		splitLines(r, func(b *lineBatch) bool {
			select {
			case ordered <- b: // the consumer waits on b.ready, in this order
			case <-done:
				return false
			}
			select {
			case jobs <- b:
				return true
			case <-done:
				close(b.ready) // never decoded: nobody waits on it
				return false
			}
		})
	}()

	var st ReadStats
	for b := range ordered {
		<-b.ready
		for i, ln := range b.lines {
			if b.errs[i] != nil {
				if !ln.complete {
					st.Torn = true
					return st, nil
				}
				return st, fmt.Errorf("ledger: ledger line %d: %w", ln.no, b.errs[i])
			}
			st.Lines++
			if err := fn(b.events[i]); err != nil {
				return st, err
			}
		}
		if b.readErr != nil {
			return st, fmt.Errorf("ledger: read ledger: %w", b.readErr)
		}
	}
	return st, nil
}

// batchLines is how many lines a worker decodes at once: enough to amortise the channel
// hand-offs, few enough that the consumer starts early.
const batchLines = 1024

// lineBatch is consecutive non-blank lines of a ledger and, once ready is closed, what
// they decoded to. readErr is a read error after the last line.
type lineBatch struct {
	buf     []byte
	lines   []batchLine
	events  []Event
	errs    []error
	readErr error
	ready   chan struct{}
}

type batchLine struct {
	from, to int // in buf
	no       int // 1-based line number
	complete bool
}

// decode decodes every line; a line that fails leaves its error and stops the batch
// there (nothing after it is read).
func (b *lineBatch) decode() {
	b.events = make([]Event, len(b.lines))
	b.errs = make([]error, len(b.lines))
	for i, ln := range b.lines {
		if err := json.Unmarshal(b.buf[ln.from:ln.to], &b.events[i]); err != nil {
			b.errs[i] = err
			b.lines = b.lines[:i+1]
			return
		}
	}
}

// maxLedgerLine is ledger.Read's bound on one line.
const maxLedgerLine = 16 << 20

// splitLines cuts r into batches of trimmed, non-blank lines as ledger.Read reads them,
// handing each to emit until it returns false. Reading stops after an incomplete last
// line or a read error (carried by the last batch).
func splitLines(r io.Reader, emit func(*lineBatch) bool) {
	br := bufio.NewReaderSize(r, 256<<10)
	b := &lineBatch{ready: make(chan struct{})}
	flush := func() bool {
		if len(b.lines) == 0 && b.readErr == nil {
			return true
		}
		ok := emit(b)
		b = &lineBatch{ready: make(chan struct{})}
		return ok
	}
	lineNo := 0
	var line []byte
	for {
		line = line[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > maxLedgerLine {
				err = fmt.Errorf("line longer than %d bytes", maxLedgerLine)
				line = line[:0]
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err == nil {
				line = line[:len(line)-1]
			}
			break
		}
		if len(line) == 0 && err != nil {
			if !errors.Is(err, io.EOF) {
				b.readErr = err
			}
			flush()
			return
		}
		lineNo++
		complete := err == nil
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			if !complete {
				flush()
				return
			}
			continue
		}
		from := len(b.buf)
		b.buf = append(b.buf, trimmed...)
		b.lines = append(b.lines, batchLine{from: from, to: len(b.buf), no: lineNo, complete: complete})
		if !complete {
			flush()
			return
		}
		if len(b.lines) == batchLines && !flush() {
			return
		}
	}
}
