package workload

import (
	"time"

	"pdsoak/chaos"
	"pdsoak/harness/client"
	"pdsoak/ledger"
)

// The ledger events of one request, as the real executor (pdsoak/harness) and the
// simulator both write them: one shape, one place. traceID is the request's trace id
// ("" when none).

// ScheduledEvent is the request's scheduled event, at its scheduled time.
func ScheduledEvent(r *Req, traceID string) ledger.Event {
	return ledger.Event{Time: r.Scheduled, Type: ledger.EventScheduled, RequestID: r.ID, Workload: r.Workload,
		Session: r.Session, Turn: r.Turn, Endpoint: EndpointName(r.Endpoint), PromptBytes: r.PromptBytes, TraceID: traceID}
}

// SentEvent is the request's sent event at at, with its lag behind the schedule.
func SentEvent(r *Req, at time.Time) ledger.Event {
	sched := r.Scheduled
	return ledger.Event{Time: at, Type: ledger.EventSent, RequestID: r.ID, Workload: r.Workload,
		Scheduled: &sched, Lag: at.Sub(sched).Seconds()}
}

// HeadersEvent is the request's headers event: the response head arrived at at.
func HeadersEvent(r *Req, at time.Time, status int) ledger.Event {
	return ledger.Event{Time: at, Type: ledger.EventHeaders, RequestID: r.ID, Workload: r.Workload, Status: status}
}

// FirstTokenEvent is the request's first_token event, its TTFT counted from the schedule.
func FirstTokenEvent(r *Req, at time.Time) ledger.Event {
	return ledger.Event{Time: at, Type: ledger.EventFirstToken, RequestID: r.ID, Workload: r.Workload,
		TTFT: at.Sub(r.Scheduled).Seconds()}
}

// DoneEvent is the request's one done event, from its result (no cause, no server
// debug: the writer knows those).
func DoneEvent(r *Req, res *client.Result, traceID string) ledger.Event {
	sched := r.Scheduled
	ev := ledger.Event{Time: res.End, Type: ledger.EventDone, RequestID: r.ID, Workload: r.Workload,
		Session: r.Session, Turn: r.Turn, Endpoint: EndpointName(r.Endpoint), Scheduled: &sched,
		Outcome: res.Outcome, Phase: res.Phase, Status: res.Status, Error: res.Err,
		TTFT: res.TTFT().Seconds(), E2E: res.E2E().Seconds(), PromptTokens: res.PromptTokens,
		PromptBytes: r.PromptBytes, CompletionTokens: res.CompletionTokens, Chunks: res.Chunks,
		Bytes: res.Bytes, FinishReason: res.FinishReason, Probe: r.Probe, TraceID: traceID,
		ConnRetry: res.ConnRetry} // the idle keep-alive race, retried on a fresh connection
	if r.Probe != "" {
		ev.Text = res.Text
	}
	if len(res.ITL) > 0 {
		ev.ITL = make([]float64, len(res.ITL))
		for i, d := range res.ITL {
			ev.ITL[i] = d.Seconds()
		}
	}
	if res.Outcome.SilentDrop() || res.Outcome == ledger.OutcomeUnresolved {
		ev.Age = res.Age().Seconds()
	}
	return ev
}

// EndpointName is the ledger's name of an endpoint ("" is chat).
func EndpointName(ep string) string {
	if ep == "" {
		return client.EndpointChat
	}
	return ep
}

// Tally applies what a client_disconnect rule (chaos.DisconnectRules.CancelAfter) says
// of r, as the executor and the simulator both do, and returns the fault statistics r
// counts in: its own (Req.Counted, a burst's) and, when the rule picks it, the rule's.
// A request with no CancelAfterTokens of its own that the rule picks (k > 0) cancels
// itself after k tokens and is counted as sent in the rule's statistics st (nil: none).
func (r *Req) Tally(k int, st *chaos.LiveStats) *Tally {
	t := &Tally{stats: [2]*chaos.LiveStats{r.Counted}}
	if k <= 0 || r.CancelAfterTokens != 0 {
		return t
	}
	r.CancelAfterTokens = k
	if st != nil {
		st.Sent.Add(1)
	}
	t.stats[1] = st
	return t
}

// Tally is the fault statistics one request counts in (nil entries: none): the
// executor and the simulator's client report its progress through it, from the
// request's own goroutine or loop.
type Tally struct {
	stats [2]*chaos.LiveStats
	first bool
}

// Began: the client began sending the request.
func (t *Tally) Began() {
	for _, s := range t.stats {
		s.Began()
	}
}

// FirstToken: its first content token arrived.
func (t *Tally) FirstToken() {
	t.first = true
	for _, s := range t.stats {
		s.FirstToken()
	}
}

// Done: it ended with res (the first token counted is the one FirstToken was told of).
func (t *Tally) Done(res *client.Result) {
	for _, s := range t.stats {
		s.Count(res.Outcome, t.first, res.Chunks)
	}
}
