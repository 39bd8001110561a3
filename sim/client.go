package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"

	"pdsoak/harness/client"
	"pdsoak/harness/judge"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/server/api"
	"pdsoak/server/gen"
	"pdsoak/traceparent"
)

// call is one request of the simulated client, from send to its one done event. It
// plays both ends of the HTTP exchange the real run has: server/api's answer writer
// (api.Answer: what to write, api.Out, for the Server's gen.Events), and, from the
// bytes it writes, the real client's answer state machine (client.Answer,
// client.Refused, client.Settle), with the client's deadlines as Loop timers.
type call struct {
	r      *runner
	req    *workload.Req
	res    *client.Result
	ans    client.Answer
	out    *api.Answer // what the front end writes
	onDone func(*client.Result)
	tally  *workload.Tally // the fault statistics it counts in

	cancel func() // the Server's: the client closing the connection
	phase  ledger.Phase
	ended  bool

	total, first, stall *Timer

	debug json.RawMessage
}

// send starts req at the loop's now (the scheduled time is req.Scheduled, or now) and
// calls onDone with its result after its done event. A fault's extra request is sent as
// any other; noLag: the workload is throttled on purpose (max_in_flight), so its sends
// say nothing about the harness.
func (r *runner) send(req *workload.Req, noLag bool, onDone func(*client.Result)) (c *call) {
	now := r.loop.Now()
	if req.Scheduled.IsZero() {
		req.Scheduled = now
	}
	c = &call{r: r, req: req, onDone: onDone,
		res: &client.Result{ID: req.ID, Scheduled: req.Scheduled, Sent: now}}
	c.ans = client.NewAnswer(&req.Request, c.res, r.loop.Now)
	r.calls = append(r.calls, c)
	r.inflightN++
	c.tally = req.Tally(r.disconnect.CancelAfter(req.Workload, req.ID, req.Stream))
	r.emit(workload.ScheduledEvent(req, traceparent.Derive(r.sc.Seed, req.ID).TraceIDHex()))
	if !noLag {
		r.sends++
	}
	r.emit(workload.SentEvent(req, now))
	c.tally.Began()
	c.phase = ledger.PhaseConnect
	body, path, err := client.Body(&req.Request)
	if err != nil {
		c.res.Outcome, c.res.Err = ledger.OutcomeInvalid, err.Error()
		c.finish()
		return c
	}
	// The deadlines run from the send, as the real client's timers. The connect bound
	// never fires: a simulated request is written the instant it is sent.
	dl := req.Deadlines
	if dl.Total > 0 {
		c.total = r.loop.After(dl.Total, func() { c.deadline("total", client.ErrTotalDeadline) })
	}
	if req.Stream && dl.FirstToken > 0 {
		c.first = r.loop.After(dl.FirstToken, func() { c.deadline("first_token", client.ErrFirstTokenDeadline) })
	}
	c.phase = ledger.PhaseBeforeHeaders
	p, ref := r.api.ParseOpenAI(path, body)
	if ref != nil {
		c.refused(ref)
		return c
	}
	c.out = p.Answer(api.Chunks{ID: api.ID(p.Chat, req.ID), Model: r.api.Model(), Created: now.Unix(), Chat: p.Chat},
		r.api.NewStreamDecoder())
	g := p.Request
	g.ID = req.ID
	r.api.StampDeadline(&g, now)
	cancel, err := r.srv.Submit(&g, c.event)
	if connLevel(err, ErrConnRefused) {
		c.phase = ledger.PhaseConnect
		c.judge(client.Facts{Phase: c.phase}, fmt.Errorf("client: Post %q: %w", "sim://front-end"+path, err))
		return c
	}
	if err != nil {
		c.refused(api.RefusalFor(err))
		return c
	}
	if !c.ended {
		c.cancel = cancel
	}
	return c
}

// connLevel reports whether err is the client's own connection failing (sentinel, not
// a gen error the front end answers with: a router whose worker leg was reset answers
// with an error status or event, which wraps a gen sentinel).
func connLevel(err, sentinel error) bool {
	if !errors.Is(err, sentinel) {
		return false
	}
	for _, k := range []error{gen.ErrOverloaded, gen.ErrInvalid, gen.ErrContextLength, gen.ErrUnavailable,
		gen.ErrTimeout, gen.ErrAborted, gen.ErrTransfer, gen.ErrInternal} {
		if errors.Is(err, k) {
			return false
		}
	}
	return true
}

// event is the Server's emit for this request: what the API writes for it, read by the
// client's Answer.
func (c *call) event(ev gen.Event) {
	if c.ended {
		return
	}
	if connLevel(ev.Err, ErrConnReset) {
		if c.res.Headers.IsZero() {
			c.judge(client.Facts{Phase: c.phase}, fmt.Errorf("client: Post %q: %w", "sim://front-end", ev.Err))
			return
		}
		// A reset mid-response: an abrupt end, as the real client's framing sees it.
		c.judge(client.Facts{Phase: c.phase, Headers: true, Status: c.res.Status, End: client.EndAbrupt},
			client.LostMidStreamError(ev.Err))
		return
	}
	if ev.Err != nil {
		ref := api.RefusalFor(ev.Err)
		if c.out.Started() {
			c.data(ref.Body) // an SSE error event and no [DONE]
			return
		}
		c.refused(ref)
		return
	}
	o, stopped := c.out.Event(ev)
	c.write(o)
	if stopped && !c.ended && c.cancel != nil {
		cancel := c.cancel // the API cancels the generation; the connection stays
		c.cancel, c.ended = nil, true
		cancel()
		c.ended = false
	}
	if (ev.Done || stopped) && !c.ended {
		o, _, _ := c.out.Finish(ev, stopped)
		c.write(o)
	}
}

// write is what the API writes (api.Out): a stream's headers and role chunk, data
// events, [DONE], or a whole answer.
func (c *call) write(x api.Out) {
	if x.Begin {
		c.headers(http.StatusOK)
		if d := c.req.Deadlines.Stall; d > 0 {
			c.stall = c.r.loop.After(d, func() { c.deadline("stall", client.ErrStallDeadline) })
		}
		if x.Role != nil {
			c.data(x.Role)
		}
	}
	for _, v := range x.Data {
		if v != nil {
			c.data(v)
		}
	}
	if x.Done {
		c.data(nil)
	}
	if x.Whole != nil {
		c.whole(x.Whole)
	}
}

func (c *call) headers(status int) {
	now := c.r.loop.Now()
	c.res.Headers, c.res.Status = now, status
	c.phase = ledger.PhaseBeforeFirstToken
	c.r.emit(workload.HeadersEvent(c.req, now, status))
}

// data is one SSE data event (v nil: [DONE]): its bytes are counted, it resets the
// stall deadline, and the client's Answer reads it.
func (c *call) data(v any) {
	if c.ended {
		return
	}
	b := []byte("[DONE]")
	if v != nil {
		b, _ = json.Marshal(v)
	}
	c.res.Bytes += int64(len("data: ") + len(b) + 2)
	if c.stall.Pending() {
		c.r.loop.Stop(c.stall)
		c.stall = c.r.loop.After(c.req.Deadlines.Stall, func() { c.deadline("stall", client.ErrStallDeadline) })
	}
	st := c.ans.Event("", string(b))
	if st.Token && c.res.Chunks == 1 {
		c.firstToken()
	}
	if st.Cancel {
		c.abort()
	}
	if st.End {
		c.judge(c.ans.Verdict())
	}
}

// firstToken is the first content's arrival: the first-token deadline is met.
func (c *call) firstToken() {
	c.phase = ledger.PhaseMidStream
	c.r.loop.Stop(c.first)
	c.tally.FirstToken()
	c.r.emit(workload.FirstTokenEvent(c.req, c.res.FirstToken))
}

// whole is a non-stream answer: headers and the whole body at the final event.
func (c *call) whole(v any) {
	if c.ended {
		return
	}
	c.headers(http.StatusOK)
	b, _ := json.Marshal(v)
	c.res.Bytes += int64(len(b) + 1)
	if c.ans.Body(b).Token {
		c.firstToken()
	}
	c.judge(c.ans.Verdict())
}

// refused is an error status before any header, with the API's error body.
func (c *call) refused(ref *api.Refusal) {
	c.headers(ref.Status)
	b, _ := json.Marshal(ref.Body)
	c.res.Bytes += int64(len(b) + 1)
	ra := ""
	if ref.RetryAfter > 0 {
		ra = strconv.Itoa(ref.RetryAfter)
	}
	c.judge(client.Refused(c.res, ref.Status, ra, b))
}

// deadline is a client deadline firing: the server is asked what it holds (for the
// silent drop's server_debug), the connection is closed (the Server's cancel), and the
// request is stalled (stall) or deadline_exceeded, in the phase it was in.
func (c *call) deadline(name string, cause error) {
	if c.ended {
		return
	}
	c.debug = c.r.debugReport(c.req.ID)
	c.abort()
	c.judge(client.Facts{Deadline: name, DeadlinePhase: c.phase}, cause)
}

// cancelled ends the request on the harness's own decision (drain bound, a fault's
// burst stopped): outcome cancelled, in its phase.
func (c *call) cancelled() {
	if c.ended {
		return
	}
	c.abort()
	c.judge(client.Facts{Cancelled: true, Phase: c.phase}, client.CancelledError(context.Canceled))
}

// abort closes the connection: the Server's cancel, at most once.
func (c *call) abort() {
	if c.cancel != nil {
		cancel := c.cancel
		c.cancel = nil
		c.ended = true // no event after cancel returns
		cancel()
	}
}

// judge classifies the request from the facts its simulated exchange produced, with the
// real client's rules (client.Settle), and finishes it; why explains any outcome but ok.
func (c *call) judge(f client.Facts, why error) {
	client.Settle(c.res, f, why, c.r.loop.Now())
	c.finish()
}

// finish writes the request's done event, as the executor does.
func (c *call) finish() {
	r, res, req := c.r, c.res, c.req
	c.ended = true
	for _, t := range []*Timer{c.total, c.first, c.stall} {
		r.loop.Stop(t)
	}
	res.End = r.loop.Now()
	res.Text = c.ans.Text()
	if i := slices.Index(r.calls, c); i >= 0 {
		r.calls = slices.Delete(r.calls, i, i+1)
	}
	r.inflightN--
	if r.interrupted != nil {
		judge.ReclassifyAtInterrupt(&req.Request, res) // as the executor: the interrupt hides no drop
	}
	c.tally.Done(res)
	ev := workload.DoneEvent(req, res, traceparent.Derive(r.sc.Seed, req.ID).TraceIDHex())
	if res.Outcome.SilentDrop() {
		ev.ServerDebug = c.debug
		r.log.Warn("silent drop", "request_id", req.ID, "outcome", res.Outcome, "phase", res.Phase,
			"deadline", res.Deadline, "age", res.Age(), "server", string(ev.ServerDebug))
	}
	r.emit(ev)
	if c.onDone != nil {
		c.onDone(res)
	}
}

// cancelAll cancels every request in flight (the end of the drain), oldest first.
func (r *runner) cancelAll() {
	for len(r.calls) > 0 {
		r.calls[0].cancelled()
	}
}

// debugReport is what /debug/requests of every process says about request id, in the
// server_debug shape of a real run (judge.DebugReportFor): the router first, then the
// workers in topology order.
func (r *runner) debugReport(id string) json.RawMessage {
	all := r.srv.Requests()
	var names []string
	seen := map[string]bool{}
	for _, p := range r.sc.Topology().Processes {
		if _, ok := all[p.Name]; ok {
			names = append(names, p.Name)
			seen[p.Name] = true
		}
	}
	var rest []string
	for name := range all {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	names = append(names, rest...)
	srcs := make([]judge.DebugSource, 0, len(names))
	for _, name := range names {
		reqs := append([]gen.RequestInfo(nil), all[name]...)
		api.OldestFirst(reqs)
		src := judge.DebugSource{Process: name, URL: "sim://" + name + "/debug/requests"}
		for _, info := range reqs {
			if !judge.MatchesID(info.ID, id) {
				continue // DebugReportFor would leave it out: not worth encoding
			}
			b, err := json.Marshal(info)
			if err == nil {
				src.Entries = append(src.Entries, b)
			}
		}
		srcs = append(srcs, src)
	}
	if len(srcs) == 0 {
		return nil
	}
	return judge.DebugReportFor(id, srcs)
}
