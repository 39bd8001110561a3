package reports

import (
	"time"

	"pdsoak/ledger"
)

// UnexplainedError is one request whose explicit error nothing explains (its cause is
// "unexplained": what explained_errors counts), with what finds it in the server's logs
// and traces.
type UnexplainedError struct {
	RequestID string         `json:"request_id"`
	Workload  string         `json:"workload,omitempty"`
	Outcome   ledger.Outcome `json:"outcome"`
	Status    int            `json:"status,omitempty"`
	Error     string         `json:"error,omitempty"`
	// At is the offset from the start of the run when it ended (seconds).
	At float64 `json:"at"`
	// TraceID is the W3C trace id the request carried in its traceparent header.
	TraceID string `json:"trace_id,omitempty"`

	end time.Time // when it ended (At is computed from it once the start is known)
}
