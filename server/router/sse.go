package router

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"pdsoak/server/gen"
)

// MaxEventBytes bounds one SSE event of a worker stream.
const MaxEventBytes = 1 << 20

var errStreamBroken = errors.New("router: worker stream broken")

// readSSE reads "data: <json>\n\n" events of gen.WorkerChunk from r and calls fn for each
// one until fn returns done=true, r ends, or an event is malformed. Comment lines (":")
// and other fields are ignored. An event of several data lines is joined with "\n".
func readSSE(r io.Reader, fn func(gen.WorkerChunk) (done bool, err error)) error {
	br := bufio.NewReaderSize(r, 16<<10)
	var data []byte
	have := false
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: stream ended without a done event", errStreamBroken)
			}
			return fmt.Errorf("%w: %w", errStreamBroken, err)
		}
		if len(line) == 0 {
			if !have {
				continue
			}
			var c gen.WorkerChunk
			if err := json.Unmarshal(data, &c); err != nil {
				return fmt.Errorf("%w: bad event %.80q: %w", errStreamBroken, data, err)
			}
			data, have = data[:0], false
			done, err := fn(c)
			if err != nil || done {
				return err
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if have {
			data = append(data, '\n')
		}
		if len(data)+len(value) > MaxEventBytes {
			return fmt.Errorf("%w: event over %d bytes", errStreamBroken, MaxEventBytes)
		}
		data = append(data, value...)
		have = true
	}
}

// readLine returns one line without its "\n" or "\r\n", bounded by MaxEventBytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > MaxEventBytes+2 {
			return nil, fmt.Errorf("line over %d bytes", MaxEventBytes)
		}
		line = append(line, frag...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// errorBody is the OpenAI error shape a worker answers a refusal with.
type errorBody struct {
	Error struct {
		Message           string  `json:"message"`
		Type              string  `json:"type"`
		Stage             string  `json:"stage"`
		RetryAfterSeconds float64 `json:"retry_after_seconds"`
	} `json:"error"`
}

// statusError rebuilds the generator error of a worker's error response.
func statusError(status int, body []byte) error {
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err == nil && eb.Error.Type != "" {
		we := gen.WorkerError{Kind: eb.Error.Type, Stage: eb.Error.Stage, Message: eb.Error.Message,
			RetryAfterSeconds: eb.Error.RetryAfterSeconds}
		return we.Err()
	}
	msg := fmt.Sprintf("worker answered %d: %.200s", status, bytes.TrimSpace(body))
	switch {
	case status == 429:
		return &gen.OverloadError{RetryAfter: 1e9, Reason: msg}
	case status == 503:
		return fmt.Errorf("%w: %s", gen.ErrUnavailable, msg)
	case status == 504:
		return fmt.Errorf("%w: %s", gen.ErrTimeout, msg)
	case status >= 400 && status < 500:
		return fmt.Errorf("%w: %s", gen.ErrInvalid, msg)
	default:
		return fmt.Errorf("%w: %s", gen.ErrInternal, msg)
	}
}
