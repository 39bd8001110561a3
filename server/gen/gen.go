package gen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"pdsoak/kernels"
)

// Request is one generation, already tokenized by the front end.
type Request struct {
	// ID is the request id (the X-Request-ID the client sent, or one the server made).
	ID string
	// Prompt is the tokenized prompt, starting with BOS.
	Prompt    []int
	MaxTokens int
	Sampling  kernels.Sampling
	// IgnoreEOS keeps generating past EOS until MaxTokens (benchmarks).
	IgnoreEOS bool
	// Deadline, when set, bounds the whole request; expiry ends it with ErrTimeout.
	Deadline time.Time
	// Bootstrap is set by the router on PD legs; nil on a colocated server.
	Bootstrap *Bootstrap
	// DecodeOnly asks a decode worker to compute the prompt itself, without a prefill
	// worker or a bootstrap room (a router's --pd-fallback decode-only).
	DecodeOnly bool
}

// Bootstrap tells a PD worker which transfer this leg belongs to.
type Bootstrap struct {
	// Room pairs the prefill leg and the decode leg of one request.
	Room uint64 `json:"bootstrap_room"`
	// Addr is the prefill worker's KV bootstrap address (host:port) that decode dials.
	Addr string `json:"bootstrap_addr"`
}

// Event is one step of a generation's stream. Exactly one event has Done set; it is the
// last one sent before the channel is closed.
type Event struct {
	Tokens []int // newly generated tokens (may be empty on the final event)
	Done   bool
	// Finish is "stop" (EOS) or "length" (MaxTokens) when Done and Err == nil.
	Finish string
	// Err is set when the request failed; it wraps one of the sentinel errors below.
	Err error
	// PromptTokens and CompletionTokens are filled on the Done event.
	PromptTokens, CompletionTokens int
}

// Generator is what the HTTP front end calls: a local engine (colocated, prefill, decode)
// or the router. Generate either refuses at once (an error wrapping ErrOverloaded,
// ErrInvalid, ErrContextLength, ErrUnavailable) or returns a channel that the generator
// closes after exactly one Done event. Cancelling ctx aborts the request: the generator
// frees its resources and sends a Done event with ErrAborted.
type Generator interface {
	Generate(ctx context.Context, req *Request) (<-chan Event, error)
}

// Sentinel errors. The HTTP layer maps them to status codes; nothing else does.
var (
	ErrOverloaded    = errors.New("overloaded")         // 503 + Retry-After
	ErrInvalid       = errors.New("invalid request")    // 400
	ErrContextLength = errors.New("context length")     // 400
	ErrUnavailable   = errors.New("unavailable")        // 503 (no healthy worker, shutting down)
	ErrTimeout       = errors.New("timeout")            // 504 before headers, stream error after
	ErrAborted       = errors.New("aborted")            // client went away or shutdown
	ErrTransfer      = errors.New("kv transfer failed") // 500/502
	ErrInternal      = errors.New("internal error")     // 500
)

// OverloadError is an ErrOverloaded with the Retry-After hint.
type OverloadError struct {
	RetryAfter time.Duration
	Reason     string
}

func (e *OverloadError) Error() string {
	return fmt.Sprintf("overloaded: %s (retry after %s)", e.Reason, e.RetryAfter)
}
func (e *OverloadError) Unwrap() error { return ErrOverloaded }

// StageError says which stage bound expired (bootstrap, prealloc, transfer, waiting,
// running, total) or which stage a failure happened in.
type StageError struct {
	Stage string
	Err   error // one of the sentinels
}

func (e *StageError) Error() string { return fmt.Sprintf("%s: %v", e.Stage, e.Err) }
func (e *StageError) Unwrap() error { return e.Err }

// RequestInfo is one in-flight request as /debug/requests shows it.
type RequestInfo struct {
	ID         string  `json:"id"`
	Stage      string  `json:"stage"`
	AgeSeconds float64 `json:"age_seconds"`
	// StageAgeSeconds is the time spent in the current stage.
	StageAgeSeconds float64 `json:"stage_age_seconds"`
	Room            *uint64 `json:"bootstrap_room,omitempty"`
	PromptTokens    int     `json:"prompt_tokens"`
	OutputTokens    int     `json:"output_tokens"`
	Pages           int     `json:"kv_pages"`
	// CachedPrefixTokens is how much of the prompt the prefix cache served (prefill and
	// colocated workers with the radix cache on).
	CachedPrefixTokens int `json:"cached_prefix_tokens,omitempty"`
	// Worker names where the router sent the request (router only).
	Prefill string `json:"prefill,omitempty"`
	Decode  string `json:"decode,omitempty"`
	// TraceID is the W3C trace id of the traceparent the request came with (32 hex
	// digits; empty without one), so the request can be found in the client's traces.
	TraceID string `json:"trace_id,omitempty"`
}

// Inspector is implemented by generators that can list their in-flight requests and
// report health (I7). The HTTP layer serves /debug/requests and /health from it.
type Inspector interface {
	Requests() []RequestInfo
	// Healthy returns nil, or why the server must be reported unhealthy.
	Healthy() error
}
