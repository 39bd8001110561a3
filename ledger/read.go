package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadStats says what Read saw.
type ReadStats struct {
	Lines int  // events decoded
	Torn  bool // the last line was incomplete and was skipped (the writer was interrupted)
}

// maxLine bounds one ledger line (server debug info included).
const maxLine = 16 << 20

// Read streams events from r to fn, one line at a time. An incomplete last line (no
// newline and not valid JSON: the writer was killed mid-write) is skipped and reported in
// ReadStats.Torn; a bad line elsewhere is an error naming its line number. Blank lines
// are ignored. An error from fn stops the read and is returned.
func Read(r io.Reader, fn func(Event) error) (ReadStats, error) {
	var st ReadStats
	br := bufio.NewReaderSize(r, 64<<10)
	lineNo := 0
	for {
		line, err := readLine(br)
		if len(line) == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				return st, nil
			}
			return st, fmt.Errorf("ledger: read ledger: %w", err)
		}
		lineNo++
		complete := err == nil
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			if !complete {
				return st, nil
			}
			continue
		}
		var ev Event
		if jerr := json.Unmarshal(trimmed, &ev); jerr != nil {
			if !complete {
				st.Torn = true
				return st, nil
			}
			return st, fmt.Errorf("ledger: ledger line %d: %w", lineNo, jerr)
		}
		st.Lines++
		if ferr := fn(ev); ferr != nil {
			return st, ferr
		}
		if !complete {
			return st, nil
		}
	}
}

// readLine returns one line without its newline; err is io.EOF when the line had no
// terminating newline (possibly torn).
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxLine)
		}
		if err == nil {
			return buf[:len(buf)-1], nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}

// ReadAll reads every event of a ledger into memory.
func ReadAll(r io.Reader) ([]Event, ReadStats, error) {
	var evs []Event
	st, err := Read(r, func(e Event) error { evs = append(evs, e); return nil })
	return evs, st, err
}

// ReadFile reads events.jsonl.
func ReadFile(path string) ([]Event, ReadStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ReadStats{}, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	return ReadAll(f)
}

// EventsFile is the ledger's file name in a run's output directory.
const EventsFile = "events.jsonl"
