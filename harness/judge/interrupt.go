package judge

import (
	"strings"
	"time"

	"pdsoak/harness/client"
	"pdsoak/ledger"
)

// What a request cancelled by the run's interrupt was, the runner's and the simulator's
// one rule ("evidence outranks interruption"): both rewrite such a request's result
// with ReclassifyAtInterrupt before its done event is written. The words of Err are
// the harness's, in either run.

// AtInterrupt classifies a request the harness cancelled because the run was
// interrupted: one already past a deadline it was still waiting on was overdue, a
// silent drop the interrupt must not hide (deadline_exceeded, with its phase and the
// bound); the rest are unresolved_at_interrupt. Ages run from the send, as the
// client's deadlines do.
func AtInterrupt(d client.Deadlines, stream bool, sent, headers, first, now time.Time) (o ledger.Outcome, phase ledger.Phase, bound string) {
	phase = ledger.PhaseMidStream
	switch {
	case sent.IsZero():
		return ledger.OutcomeUnresolved, ledger.PhaseConnect, ""
	case headers.IsZero():
		phase = ledger.PhaseBeforeHeaders
	case first.IsZero():
		phase = ledger.PhaseBeforeFirstToken
	}
	age := now.Sub(sent)
	switch {
	case d.Total > 0 && age > d.Total:
		return ledger.OutcomeDeadlineExceeded, phase, "total"
	case stream && first.IsZero() && d.FirstToken > 0 && age > d.FirstToken:
		return ledger.OutcomeDeadlineExceeded, phase, "first_token"
	}
	return ledger.OutcomeUnresolved, phase, ""
}

// interruptCancelled reports whether res is a cancellation by the interrupt rather
// than by a client-disconnect fault.
func interruptCancelled(res *client.Result) bool {
	return res.Outcome == ledger.OutcomeCancelled && !strings.Contains(res.Err, client.ErrClientCancel.Error())
}

// ReclassifyAtInterrupt rewrites a request cancelled by the interrupt (see
// AtInterrupt); it reports whether it changed the outcome.
func ReclassifyAtInterrupt(r *client.Request, res *client.Result) bool {
	if !interruptCancelled(res) {
		return false
	}
	o, phase, bound := AtInterrupt(r.Deadlines, r.Stream, res.Sent, res.Headers, res.FirstToken, res.End)
	res.Outcome, res.Phase, res.Deadline = o, phase, bound
	if o == ledger.OutcomeDeadlineExceeded {
		res.Err = "harness: overdue (" + bound + " deadline passed) when the run was interrupted"
	} else {
		res.Err = "harness: still in flight, within its deadlines, when the run was interrupted"
	}
	return true
}
