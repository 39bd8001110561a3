package reports

import "pdsoak/ledger"

// UnexplainedError is one request whose non-ok outcome nothing explains (done event
// cause "unexplained"), with what finds it in the server's logs and traces.
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
}

// addUnexplained keeps the first MaxDrops unexplained errors of the ledger.
func (b *Builder) addUnexplained(e ledger.Event, o ledger.Outcome) {
	if o == ledger.OutcomeOK || e.Cause != ledger.CauseUnexplained || len(b.unexpl) >= b.cfg.MaxDrops {
		return
	}
	b.unexpl = append(b.unexpl, UnexplainedError{RequestID: e.RequestID, Workload: e.Workload, Outcome: o,
		Status: e.Status, Error: e.Error, At: e.Time.Sub(b.start).Seconds(), TraceID: e.TraceID})
}
