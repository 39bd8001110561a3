package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"pdsoak/server/gen"
	"pdsoak/sse"
)

// MaxEventBytes bounds one SSE event of a worker stream.
const MaxEventBytes = 1 << 20

var errStreamBroken = errors.New("router: worker stream broken")

// readSSE reads the gen.WorkerChunk events of a worker stream and calls fn for each
// one until fn returns done=true, r ends, or an event is malformed. A stream that ends
// without a done event, or with a malformed or oversized event, is broken
// (errStreamBroken). Comments and the event type are ignored: workers send only data.
func readSSE(r io.Reader, fn func(gen.WorkerChunk) (done bool, err error)) error {
	sr := sse.NewReader(r, sse.WithMaxLine(MaxEventBytes))
	defer sr.Release() // its buffer goes to the next leg's reader
	for {
		ev, err := sr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: stream ended without a done event", errStreamBroken)
			}
			return fmt.Errorf("%w: %w", errStreamBroken, err)
		}
		if ev.Comment {
			continue
		}
		c, err := gen.DecodeWorkerChunk(ev.Data)
		if err != nil {
			return fmt.Errorf("%w: bad event %.80q: %w", errStreamBroken, ev.Data, err)
		}
		done, err := fn(c)
		if err != nil || done {
			return err
		}
	}
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
