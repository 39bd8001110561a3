package gen

import (
	"errors"
	"fmt"
	"time"
)

// WorkerRequest is the body of POST /generate on a prefill, decode or colocated worker:
// what the router sends to each PD leg (the shape of SGLang's native /generate).
// The worker answers with text/event-stream; each event is "data: <WorkerChunk JSON>\n\n"
// and the last has done=true. A refusal at admission is an HTTP error status with the
// OpenAI error body whose error.type is an error kind (see ErrorKind).
type WorkerRequest struct {
	RID            string         `json:"rid"`
	InputIDs       []int          `json:"input_ids"`
	SamplingParams WorkerSampling `json:"sampling_params"`
	// BootstrapRoom and BootstrapAddr are set on PD legs.
	BootstrapRoom *uint64 `json:"bootstrap_room,omitempty"`
	BootstrapAddr string  `json:"bootstrap_addr,omitempty"`
	// DeadlineUnixMs bounds the whole request (0: the worker's own default).
	DeadlineUnixMs int64 `json:"deadline_unix_ms,omitempty"`
	// DecodeOnly: a decode worker serves the request alone, computing the prompt (no
	// bootstrap room); see Request.DecodeOnly.
	DecodeOnly bool `json:"decode_only,omitempty"`
}

// WorkerSampling is sampling_params of a WorkerRequest.
type WorkerSampling struct {
	MaxNewTokens int     `json:"max_new_tokens"`
	Temperature  float64 `json:"temperature"`
	TopP         float64 `json:"top_p,omitempty"`
	Seed         uint64  `json:"seed,omitempty"`
	IgnoreEOS    bool    `json:"ignore_eos,omitempty"`
}

// WorkerChunk is one SSE event of a /generate stream.
type WorkerChunk struct {
	TokenIDs         []int        `json:"token_ids,omitempty"`
	Done             bool         `json:"done,omitempty"`
	Finish           string       `json:"finish_reason,omitempty"`
	Error            *WorkerError `json:"error,omitempty"`
	PromptTokens     int          `json:"prompt_tokens,omitempty"`
	CompletionTokens int          `json:"completion_tokens,omitempty"`
}

// WorkerError carries a gen error across a process boundary.
type WorkerError struct {
	Kind              string  `json:"kind"`
	Stage             string  `json:"stage,omitempty"`
	Message           string  `json:"message"`
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
}

var kinds = []struct {
	name string
	err  error
}{
	{"overloaded", ErrOverloaded}, {"invalid_request", ErrInvalid},
	{"context_length_exceeded", ErrContextLength}, {"unavailable", ErrUnavailable},
	{"timeout", ErrTimeout}, {"aborted", ErrAborted}, {"kv_transfer_failed", ErrTransfer},
	{"internal_error", ErrInternal},
}

// ErrorKind names the sentinel an error wraps ("internal_error" when none).
func ErrorKind(err error) string {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "internal_error"
}

// ToWorkerError converts an error for the wire.
func ToWorkerError(err error) *WorkerError {
	we := &WorkerError{Kind: ErrorKind(err), Message: err.Error()}
	var se *StageError
	if errors.As(err, &se) {
		we.Stage = se.Stage
	}
	var oe *OverloadError
	if errors.As(err, &oe) {
		we.RetryAfterSeconds = oe.RetryAfter.Seconds()
	}
	return we
}

// Err turns a wire error back into an error that wraps the right sentinel.
func (w *WorkerError) Err() error {
	sentinel := ErrInternal
	for _, k := range kinds {
		if k.name == w.Kind {
			sentinel = k.err
		}
	}
	if sentinel == ErrOverloaded {
		return &OverloadError{RetryAfter: time.Duration(w.RetryAfterSeconds * float64(time.Second)), Reason: w.Message}
	}
	err := fmt.Errorf("%w: %s", sentinel, w.Message)
	if w.Stage != "" {
		return &StageError{Stage: w.Stage, Err: err}
	}
	return err
}
