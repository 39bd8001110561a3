package api

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"pdsoak/server/gen"
)

// ErrorResponse is the OpenAI error body every error response of this package carries:
// {"error":{"message":...,"type":...,"param":...,"code":...}}. Type is the gen error kind
// (gen.ErrorKind: "overloaded", "invalid_request", "context_length_exceeded", ...), so a
// router reading a worker's refusal can rebuild the sentinel with gen.WorkerError.Err.
// The same object is the payload of an SSE error event once a stream has started.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the "error" object of ErrorResponse. Stage and RetryAfterSeconds are
// extensions, present only when known.
type ErrorDetail struct {
	Message           string  `json:"message"`
	Type              string  `json:"type"`
	Param             *string `json:"param"`
	Code              *string `json:"code"`
	Stage             string  `json:"stage,omitempty"`
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
}

// WorkerError converts the detail back into the wire error of server/gen.
func (d ErrorDetail) WorkerError() *gen.WorkerError {
	return &gen.WorkerError{Kind: d.Type, Stage: d.Stage, Message: d.Message, RetryAfterSeconds: d.RetryAfterSeconds}
}

// apiError is an error whose HTTP status and OpenAI fields are already decided.
type apiError struct {
	status     int
	kind       string // error.type
	code       string // error.code, "" for null
	param      string // error.param, "" for null
	msg        string
	stage      string
	retryAfter int // whole seconds for the Retry-After header; 0 for none
}

func (e *apiError) Error() string { return "api: " + e.msg }

func (e *apiError) body() ErrorResponse {
	d := ErrorDetail{Message: e.msg, Type: e.kind, Stage: e.stage}
	if e.code != "" {
		d.Code = &e.code
	}
	if e.param != "" {
		d.Param = &e.param
	}
	if e.retryAfter > 0 {
		d.RetryAfterSeconds = float64(e.retryAfter)
	}
	return ErrorResponse{Error: d}
}

// invalid builds a 400 naming the offending request field.
func invalid(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: gen.ErrorKind(gen.ErrInvalid),
		code: "invalid_value", param: param, msg: msg}
}

// tooLong builds the 400 for a prompt (plus max_tokens) over the context length.
func tooLong(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: gen.ErrorKind(gen.ErrContextLength),
		code: "context_length_exceeded", param: param, msg: msg}
}

// StatusFor maps an error from a gen.Generator to its HTTP status and, for overload, the
// Retry-After value in whole seconds (at least 1). This is the only place in pdsoak where
// generator errors become status codes.
func StatusFor(err error) (status int, retryAfter int) {
	switch {
	case errors.Is(err, gen.ErrOverloaded):
		retryAfter = 1
		var oe *gen.OverloadError
		if errors.As(err, &oe) && oe.RetryAfter > 0 {
			retryAfter = int(math.Ceil(oe.RetryAfter.Seconds()))
			if retryAfter < 1 {
				retryAfter = 1
			}
		}
		return http.StatusServiceUnavailable, retryAfter
	case errors.Is(err, gen.ErrInvalid), errors.Is(err, gen.ErrContextLength):
		return http.StatusBadRequest, 0
	case errors.Is(err, gen.ErrUnavailable):
		return http.StatusServiceUnavailable, 0
	case errors.Is(err, gen.ErrTimeout):
		return http.StatusGatewayTimeout, 0
	case errors.Is(err, gen.ErrAborted):
		// Only server-side aborts (shutdown) are ever answered: a client that went away
		// receives nothing.
		return http.StatusServiceUnavailable, 0
	case errors.Is(err, gen.ErrTransfer):
		return http.StatusBadGateway, 0
	default:
		return http.StatusInternalServerError, 0
	}
}

// fromGen converts a generator error into an apiError.
func fromGen(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	status, ra := StatusFor(err)
	e := &apiError{status: status, kind: gen.ErrorKind(err), msg: err.Error(), retryAfter: ra}
	var se *gen.StageError
	if errors.As(err, &se) {
		e.stage = se.Stage
	}
	if e.kind == "context_length_exceeded" {
		e.code = e.kind
	}
	return e
}

// writeError sends an error response before any header has been written.
func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	w.WriteHeader(e.status)
	b, _ := json.Marshal(e.body())
	_, _ = w.Write(append(b, '\n'))
}

// Refusal is an error answer the OpenAI endpoints send before any header: its status,
// its Retry-After in whole seconds (0: none) and its body. The simulator answers its
// requests with it, so a simulated refusal is the real one.
type Refusal struct {
	Status     int
	RetryAfter int
	Body       ErrorResponse
}

func (r *Refusal) Error() string { return "api: " + r.Body.Error.Message }

func (e *apiError) refusal() *Refusal {
	return &Refusal{Status: e.status, RetryAfter: e.retryAfter, Body: e.body()}
}

// RefusalFor is the answer to a generator error: the error response before headers,
// whose Body is also the payload of the SSE error event once a stream has started.
func RefusalFor(err error) *Refusal { return fromGen(err).refusal() }
