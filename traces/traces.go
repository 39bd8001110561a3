package traces

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// Formats.
const (
	Mooncake = "mooncake"
	Azure    = "azure"
	BurstGPT = "burstgpt"
)

// Formats lists the formats Parse reads.
var Formats = []string{Mooncake, Azure, BurstGPT}

// BlockTokens is the size of one Mooncake hash block in tokens.
const BlockTokens = 512

// MaxRequests bounds a trace's size: a replay is bounded in count.
const MaxRequests = 1_000_000

// Request is one request of a trace.
type Request struct {
	// At is the arrival time from the trace's first request.
	At time.Duration
	// Input and Output are the prompt and generated token counts.
	Input, Output int
	// Blocks are the prompt's 512-token block ids (mooncake); equal ids are equal
	// blocks. Formats without them get ids no other request shares.
	Blocks []uint64
	// Line is the 1-based line of the trace file (for messages).
	Line int
}

// Trace is a parsed trace, sorted by arrival.
type Trace struct {
	Format   string
	Requests []Request
}

// Error is a problem at one line of a trace file.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("traces: %s:%d", e.File, e.Line)
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Msg
}

// Detect names the format of a trace from its first non-empty line.
func Detect(data []byte) (string, error) {
	for line := range bytes.Lines(data) {
		l := bytes.TrimSpace(bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")))
		if len(l) == 0 {
			continue
		}
		switch {
		case l[0] == '{':
			return Mooncake, nil
		case bytes.HasPrefix(bytes.ToLower(l), []byte("timestamp,contexttokens")):
			return Azure, nil
		case bytes.HasPrefix(bytes.ToLower(l), []byte("timestamp,model")):
			return BurstGPT, nil
		}
		return "", fmt.Errorf("traces: unknown format: the first line is neither a JSON object (mooncake) nor an azure (TIMESTAMP,ContextTokens,...) or burstgpt (Timestamp,Model,...) CSV header")
	}
	return "", fmt.Errorf("traces: empty trace")
}

// Parse reads a trace; format "" detects it. file names the source in errors.
func Parse(file string, data []byte, format string) (*Trace, error) {
	if format == "" {
		f, err := Detect(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		format = f
	}
	var reqs []Request
	var err error
	switch format {
	case Mooncake:
		reqs, err = parseMooncake(file, data)
	case Azure:
		reqs, err = parseAzure(file, data)
	case BurstGPT:
		reqs, err = parseBurstGPT(file, data)
	default:
		return nil, fmt.Errorf("traces: unknown format %q (want %v)", format, Formats)
	}
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, &Error{File: file, Line: 1, Msg: "no requests"}
	}
	// Traces are published sorted; a stable sort keeps ties in file order either way.
	slices.SortStableFunc(reqs, func(a, b Request) int {
		return int(min(max(a.At-b.At, -1), 1))
	})
	t0 := reqs[0].At
	for i := range reqs {
		reqs[i].At -= t0
	}
	return &Trace{Format: format, Requests: reqs}, nil
}

// uniqueBlocks gives a request without hash ids blocks no other request shares: ids
// above every mooncake id, keyed by the line.
func uniqueBlocks(line, input int) []uint64 {
	n := max((input+BlockTokens-1)/BlockTokens, 1)
	out := make([]uint64, n)
	for i := range out {
		out[i] = 1<<63 | uint64(line)<<20 | uint64(i)
	}
	return out
}
