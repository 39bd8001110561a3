package client

import (
	"net/http"

	"pdsoak/ledger"
)

// End is how a response body ended, as the wire saw it.
type End uint8

// Ends of a body.
const (
	// EndOpen: the exchange stopped before the body ended (or before there was one).
	EndOpen End = iota
	// EndClean: the body reached its end by the framing's rules: the chunked
	// terminator, the Content-Length, or the close that delimits a body without either.
	EndClean
	// EndAbrupt: EOF or reset before that end.
	EndAbrupt
)

// Facts are what a client observed of one exchange: everything the classification
// needs, and nothing about how the bytes moved. The real client (both of its
// transports) and the simulator (pdsoak/sim) fill them in and call Classify, so there is
// one copy of the rules.
type Facts struct {
	// Deadline names the bound that fired first (connect, first_token, stall, total;
	// "" none) and DeadlinePhase the phase the request was in when it did.
	Deadline      string
	DeadlinePhase ledger.Phase
	// ClientAbort: the request's own client_disconnect (CancelAfterTokens) ended it.
	ClientAbort bool
	// Cancelled: the harness cancelled it (drain bound, shutdown).
	Cancelled bool
	// Phase is the phase the exchange was in when it ended.
	Phase ledger.Phase
	// Headers: a response head arrived; Status is its status.
	Headers bool
	Status  int
	// End is how the body ended.
	End End
	// StreamError: an SSE error event, or an error object in the body.
	StreamError bool
	// Invalid: the body broke the protocol (unparseable chunk, an answer that is not the
	// stream asked for, an undecodable content coding, a broken stream invariant).
	Invalid bool
	// Done: the protocol's own end arrived (data: [DONE] for a stream, the whole JSON
	// body otherwise). Finished: a finish_reason (every choice's, for a whole body).
	Done, Finished bool
	// UsageSent: the server sent usage; CompletionTokens is what it said and Pieces the
	// content chunks (stream) or choices with content (whole body) received.
	UsageSent        bool
	CompletionTokens int
	Pieces           int
}

// Verdict is a classification: the outcome, and the phase and deadline where they apply.
type Verdict struct {
	Outcome  ledger.Outcome
	Phase    ledger.Phase // stalled, deadline_exceeded, cancelled
	Deadline string       // stalled, deadline_exceeded
}

// Classify turns the facts of one exchange into its outcome. The first rule that
// applies wins: a deadline that fired (even if a reply arrived while the server was
// inspected), a cancellation, no response head (transport_error), an error status, an
// error in the body, a protocol violation (invalid), the protocol's end (ok, unless the
// finish_reason is missing — truncated — or usage disagrees — invalid), an abrupt end
// (connection_lost), and a clean end without the protocol's end (truncated).
func Classify(f Facts) Verdict {
	switch {
	case f.Deadline == "stall":
		return Verdict{Outcome: ledger.OutcomeStalled, Phase: f.DeadlinePhase, Deadline: f.Deadline}
	case f.Deadline != "":
		return Verdict{Outcome: ledger.OutcomeDeadlineExceeded, Phase: f.DeadlinePhase, Deadline: f.Deadline}
	case f.ClientAbort, f.Cancelled:
		return Verdict{Outcome: ledger.OutcomeCancelled, Phase: f.Phase}
	case !f.Headers:
		return Verdict{Outcome: ledger.OutcomeTransportError}
	case f.Status == http.StatusTooManyRequests || f.Status == http.StatusServiceUnavailable:
		return Verdict{Outcome: ledger.OutcomeRejected}
	case f.Status < 200 || f.Status > 299:
		return Verdict{Outcome: ledger.OutcomeHTTPError}
	case f.StreamError:
		return Verdict{Outcome: ledger.OutcomeStreamError}
	case f.Invalid:
		return Verdict{Outcome: ledger.OutcomeInvalid}
	case f.Done && !f.Finished:
		return Verdict{Outcome: ledger.OutcomeTruncated}
	case f.Done && f.UsageSent && f.CompletionTokens < f.Pieces:
		return Verdict{Outcome: ledger.OutcomeInvalid}
	case f.Done:
		return Verdict{Outcome: ledger.OutcomeOK}
	case f.End == EndAbrupt:
		return Verdict{Outcome: ledger.OutcomeConnectionLost}
	}
	return Verdict{Outcome: ledger.OutcomeTruncated}
}
