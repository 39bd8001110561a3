package reports

import (
	"time"

	"pdsoak/ledger"
)

// DefaultCauseMargin is how long after a fault stops a request that began then may
// still blame it: a restarted worker is marked healthy again, a reconnected link
// re-dialled, only after the revert.
const DefaultCauseMargin = 10 * time.Second

// clientFaultTypes act on the harness's own client, not on the target: they explain
// only the requests the client itself ended (cancelled).
var clientFaultTypes = map[string]bool{"client_disconnect": true}

// FaultWindow is one injected fault as cause attribution sees it: its name, type and
// target from fault_start, and when it was active. Stop zero: still active.
type FaultWindow struct {
	Name, Type, Target string
	Start, Stop        time.Time
	// Permanent: the fault declared that what it stops stays stopped (a kill with
	// restart: false), so an outage it explains is expected never to end.
	Permanent bool
}

// permanent reports whether a fault's params say its process is not restarted.
func permanent(params map[string]any) bool {
	switch v := params["restart"].(type) {
	case bool:
		return !v
	case string:
		return v == "false"
	}
	return false
}

// CauseRequest is what attribution needs to know about one finished request.
type CauseRequest struct {
	Outcome ledger.Outcome
	// Start is when the request was scheduled (or sent); End when it ended.
	Start, End time.Time
	// Serves reports whether a fault target (a process, a link, a role) serves this
	// request. Nil: every target does — the harness cannot see which worker pair a
	// router picked, so any fault on the topology may explain any request.
	Serves func(target string) bool
}

// Cause says what explains a request's outcome (see ledger.Cause*): "" for ok,
// CauseRefused for an explicit 429/503, CauseClient for what the client ended itself
// (cancelled, or unresolved at an interrupt), CauseFaultPrefix+name for the fault that
// acted on what serves the request, and CauseUnexplained otherwise. The fault is the
// first (in faults' order) that was active while the request was in flight; failing
// that, the first whose margin after its stop the request began in (a fault still
// acting outranks one whose aftermath might explain it). It is the one rule: the
// runner calls it when it writes each done event, and reports recomputes it for
// ledgers written without causes (the simulator's, older runs).
func Cause(req CauseRequest, faults []FaultWindow, margin time.Duration) string {
	switch req.Outcome {
	case ledger.OutcomeOK:
		return ""
	case ledger.OutcomeRejected:
		return ledger.CauseRefused
	case ledger.OutcomeUnresolved:
		return ledger.CauseClient
	}
	for _, m := range [...]time.Duration{0, margin} {
		if name := faultCause(req, faults, m); name != "" {
			return ledger.CauseFaultPrefix + name
		}
	}
	if req.Outcome == ledger.OutcomeCancelled {
		return ledger.CauseClient // the scenario's own cancellations, the drain's
	}
	return ledger.CauseUnexplained
}

// faultCause is the name of the first fault that acted on what serves req while it was
// in flight or within margin before it began, or "".
func faultCause(req CauseRequest, faults []FaultWindow, margin time.Duration) string {
	for _, f := range faults {
		if !f.overlaps(req.Start, req.End, margin) {
			continue
		}
		if clientFaultTypes[f.Type] {
			if req.Outcome == ledger.OutcomeCancelled {
				return f.Name
			}
			continue
		}
		if req.Serves == nil || req.Serves(f.Target) {
			return f.Name
		}
	}
	return ""
}

// overlaps reports whether [start, end] meets the fault's window widened by margin
// after its stop.
func (f FaultWindow) overlaps(start, end time.Time, margin time.Duration) bool {
	if end.IsZero() {
		end = start
	}
	if end.Before(f.Start) {
		return false
	}
	return f.Stop.IsZero() || !start.After(f.Stop.Add(margin))
}

// ErrorCounted reports whether explained_errors judges outcome o: the explicit errors.
// Silent drops are no_silent_drops's, invalid and truncated bodies valid_responses's
// (a server defect whatever happened around it), ok and an interrupt's unresolved
// requests are not errors.
func ErrorCounted(o ledger.Outcome) bool {
	switch o {
	case ledger.OutcomeOK, ledger.OutcomeUnresolved, ledger.OutcomeInvalid, ledger.OutcomeTruncated:
		return false
	}
	return !o.SilentDrop()
}

// FaultTracker follows fault_start and fault_stop events as they happen and hands out
// the windows so far: the runner attributes each request as it ends with it, and
// reports does the same over a whole ledger. Not safe for concurrent use.
type FaultTracker struct {
	windows []FaultWindow
	idx     map[string]int
}

// Add folds a ledger event into the tracker; other event types are ignored.
func (t *FaultTracker) Add(e ledger.Event) {
	switch e.Type {
	case ledger.EventFaultStart:
		if t.idx == nil {
			t.idx = map[string]int{}
		}
		if i, ok := t.idx[e.Fault]; ok {
			t.windows[i].Start = e.Time
			return
		}
		t.idx[e.Fault] = len(t.windows)
		t.windows = append(t.windows, FaultWindow{Name: e.Fault, Type: e.FaultType, Target: e.Target, Start: e.Time,
			Permanent: permanent(e.Params)})
	case ledger.EventFaultStop:
		if i, ok := t.idx[e.Fault]; ok {
			t.windows[i].Stop = e.Time
		}
	}
}

// Windows returns a copy of the windows seen so far, in start order.
func (t *FaultTracker) Windows() []FaultWindow {
	return append([]FaultWindow(nil), t.windows...)
}
