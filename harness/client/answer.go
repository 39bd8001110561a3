package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"pdsoak/ledger"
)

// Answer is one response's client-side state machine, from its 2xx head on: it takes
// the answer as it arrives (each SSE event of a stream with Event, a whole body with
// Body) and keeps the Result and the tallies the classifier needs, and when a step ends
// the answer, the Facts that classify it. The real client's readers (read.go) feed it
// what they parse off the wire; the simulator (pdsoak/sim) feeds it the chunks its front
// end would have written. Either way the rules are these: there is one copy.
//
//	a := client.NewAnswer(req, res, now)
//	for each SSE event that is not a comment {
//		st := a.Event(ev.Type, ev.Data)
//		if st.Token && res.Chunks == 1 { /* the first token */ }
//		if st.End { f, why := a.Verdict(); /* Classify f */ }
//	}
type Answer struct {
	req  *Request
	res  *Result
	now  func() time.Time
	rcv  received
	text strings.Builder
	last time.Time // the last content chunk's arrival
	// facts and why classify the answer once a step ended it.
	facts Facts
	why   error
}

// Step is what one event (or a whole body) did to an Answer.
type Step struct {
	// Token: a content chunk arrived; Result.Chunks counts it, and the first sets
	// Result.FirstToken.
	Token bool
	// Cancel: the request's CancelAfterTokens is reached; the client disconnects now.
	Cancel bool
	// End: the answer ended; Verdict has its facts.
	End bool
}

// NewAnswer starts the answer to req, recorded in res (whose Status is the head's);
// now is the clock of token arrivals.
func NewAnswer(req *Request, res *Result, now func() time.Time) Answer {
	return Answer{req: req, res: res, now: now}
}

// Verdict is the facts of an ended answer and what explains any outcome but ok.
func (a *Answer) Verdict() (Facts, error) { return a.facts, a.why }

// Text is the content received so far.
func (a *Answer) Text() string { return a.text.String() }

func (a *Answer) end(f Facts, why error) Step {
	a.facts, a.why = f, why
	return Step{End: true}
}

// bad is the facts of a body that broke the protocol.
func (a *Answer) bad() Facts { return Facts{Headers: true, Status: a.res.Status, Invalid: true} }

// Event takes one SSE event of a stream (not a comment: keep-alives are not progress):
// ok needs a chunk with a finish_reason, then [DONE]; an error event, an error object or
// a broken invariant ends the stream. Nothing of data is kept past the call (the
// client passes the SSE reader's own buffer, sse.Reader.NextView).
func (a *Answer) Event(typ, data string) Step {
	if strings.TrimSpace(data) == done {
		return a.ended(a.rcv.finished, " (stream sent [DONE])")
	}
	var ch chunk // on the stack: decodeChunk resets it, and nothing of it is held after
	if err := decodeChunk(data, &ch); err != nil {
		if typ == "error" {
			return a.end(Facts{Headers: true, Status: a.res.Status, StreamError: true}, fmt.Errorf("client: error event: %s", trim(data)))
		}
		return a.end(a.bad(), fmt.Errorf("client: unparseable chunk %q: %w", trim(data), err))
	}
	if typ == "error" || ch.hasError() {
		msg := trim(data)
		if ch.hasError() {
			msg = ch.errText()
		}
		return a.end(Facts{Headers: true, Status: a.res.Status, StreamError: true}, fmt.Errorf("client: error event: %s", msg))
	}
	if err := a.rcv.check(&ch, a.req); err != nil {
		return a.end(a.bad(), err)
	}
	content := ch.apply(a.res, &a.rcv)
	if content == "" {
		return Step{}
	}
	a.rcv.pieces++
	a.token()
	a.text.WriteString(content)
	// The k-th token with the finish_reason is an answer whose end has come: only [DONE]
	// (and usage) is left, so the client reads on rather than calling a whole answer
	// its own cancel (max_tokens == k made every such request "cancelled").
	if k := a.req.CancelAfterTokens; k > 0 && a.res.Chunks >= k && !a.rcv.finished {
		a.facts, a.why = Facts{ClientAbort: true, Phase: ledger.PhaseMidStream, Headers: true, Status: a.res.Status}, ErrClientCancel
		return Step{Token: true, Cancel: true, End: true}
	}
	return Step{Token: true}
}

// token records one content chunk's arrival: first token, inter-token gap.
func (a *Answer) token() {
	now := a.now()
	a.res.Chunks++
	if !a.res.FirstToken.IsZero() {
		a.res.ITL = append(a.res.ITL, now.Sub(a.last))
	} else {
		a.res.FirstToken = now
	}
	a.last = now
}

// Body takes a whole (non-stream) answer: ok needs a JSON object whose choices all
// carry a finish_reason. It always ends the answer.
func (a *Answer) Body(data []byte) Step {
	var ch chunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return a.end(a.bad(), fmt.Errorf("client: unparseable body %q: %w", trim(string(data)), err))
	}
	if ch.hasError() {
		return a.end(Facts{Headers: true, Status: a.res.Status, StreamError: true}, fmt.Errorf("client: error in body: %s", ch.errText()))
	}
	if len(ch.Choices) == 0 {
		return a.end(a.bad(), errors.New("client: body has no choices"))
	}
	if err := a.rcv.check(&ch, a.req); err != nil {
		return a.end(a.bad(), err)
	}
	a.text.WriteString(ch.apply(a.res, &a.rcv))
	a.res.FirstToken, a.res.Chunks = a.now(), 1
	for i, chc := range ch.Choices {
		if chc.FinishReason == "" {
			a.end(Facts{Headers: true, Status: a.res.Status, Done: true}, fmt.Errorf("client: choice %d of the body has no finish_reason", i))
			return Step{Token: true, End: true}
		}
		if chc.Delta.Content+chc.Message.Content+chc.Text != "" {
			a.rcv.pieces++
		}
	}
	st := a.ended(true, "")
	st.Token = true
	return st
}

// ended is an answer whose protocol end arrived ([DONE], or the whole body): ok, or
// truncated without a finish_reason, or invalid when usage disagrees.
func (a *Answer) ended(finished bool, suffix string) Step {
	f := Facts{Headers: true, Status: a.res.Status, End: EndClean, Done: true, Finished: finished,
		UsageSent: a.rcv.usage, CompletionTokens: a.res.CompletionTokens, Pieces: a.rcv.pieces}
	var why error
	switch Classify(f).Outcome {
	case ledger.OutcomeTruncated:
		why = errors.New("client: response ended without a finish_reason" + suffix)
	case ledger.OutcomeInvalid:
		why = fmt.Errorf("client: usage says %d completion tokens, %d content chunks arrived%s", a.res.CompletionTokens, a.rcv.pieces, suffix)
	}
	return a.end(f, why)
}

// Refused is the facts of an answer with an error status, whose body is the error:
// 429 and 503 are explicit refusals (res keeps their Retry-After), the rest HTTP errors.
func Refused(res *Result, status int, retryAfter string, body []byte) (Facts, error) {
	f := Facts{Headers: true, Status: status}
	if Classify(f).Outcome == ledger.OutcomeRejected {
		res.RetryAfter = retryAfter
	}
	return f, fmt.Errorf("client: status %d: %s", status, errorMessage(body))
}

// errorMessage is an error body's message: the OpenAI error's, or the body itself.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// Settle ends res at end with Classify's verdict on f; why explains any outcome but ok.
func Settle(res *Result, f Facts, why error, end time.Time) {
	v := Classify(f)
	res.Phase = v.Phase
	if v.Outcome == ledger.OutcomeOK {
		why = nil
	}
	res.Outcome, res.Deadline = v.Outcome, v.Deadline
	if why != nil {
		res.Err = why.Error()
	}
	res.End = end
}

// chunk is the union of chat and completions stream chunks and full responses. It
// decodes only what the classifier needs: it runs once per chunk.
type chunk struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Choices []choice `json:"choices"`
	Usage   *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type choice struct {
	Index int `json:"index"`
	Delta struct {
		Content string `json:"content"`
	} `json:"delta"`
	Message struct {
		Content string `json:"content"`
	} `json:"message"`
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason"` // null decodes as ""
}

func (ch *chunk) hasError() bool {
	return len(ch.Error) > 0 && !bytes.Equal(ch.Error, []byte("null"))
}

func (ch *chunk) errText() string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(ch.Error, &e) == nil && e.Message != "" {
		return e.Message
	}
	return string(ch.Error)
}

// keep is s (a finish_reason) for the result to keep: a chunk's strings view the event
// data (Event's data may be the SSE reader's buffer), so the common values are
// constants and any other is copied.
func keep(s string) string {
	for _, k := range [...]string{"stop", "length", "tool_calls", "content_filter", "abort"} {
		if s == k {
			return k
		}
	}
	return strings.Clone(s)
}

// received is what the classifier tallies of a response for the completeness rules.
type received struct {
	finished bool   // some choice carried a finish_reason
	usage    bool   // the server sent usage
	pieces   int    // content chunks (stream) or choices with content (whole body)
	id       string // the stream's id, from its first chunk that has one
}

// objectOf is the "object" an answer to req must carry (when it carries one).
func objectOf(req *Request) string {
	switch {
	case req.Endpoint == EndpointCompletions:
		return "text_completion"
	case req.Stream:
		return "chat.completion.chunk"
	}
	return "chat.completion"
}

// check applies the stream invariants to one chunk: one id per stream, the object the
// endpoint answers with, and choice indexes below n (the client never asks for n > 1).
func (rcv *received) check(ch *chunk, req *Request) error {
	if ch.ID != "" {
		if rcv.id == "" {
			rcv.id = strings.Clone(ch.ID) // not the whole first chunk, for the stream's life
		} else if ch.ID != rcv.id {
			return fmt.Errorf("client: stream id changed from %q to %q: two streams crossed", trim(rcv.id), trim(ch.ID))
		}
	}
	if ch.Object != "" && ch.Object != objectOf(req) {
		return fmt.Errorf("client: object %q, want %q for this endpoint", trim(ch.Object), objectOf(req))
	}
	for i := range ch.Choices {
		if x := ch.Choices[i].Index; x < 0 || x >= 1 {
			return fmt.Errorf("client: choice index %d out of range (n=1)", x)
		}
	}
	return nil
}

// apply records ch in res and rcv and returns its content.
func (ch *chunk) apply(res *Result, rcv *received) (content string) {
	if ch.Usage != nil {
		rcv.usage = true
		res.PromptTokens = ch.Usage.PromptTokens
		res.CompletionTokens = ch.Usage.CompletionTokens
	}
	for i := range ch.Choices {
		c := &ch.Choices[i]
		content += c.Delta.Content + c.Message.Content + c.Text
		if c.FinishReason != "" {
			res.FinishReason = keep(c.FinishReason)
			rcv.finished = true
		}
	}
	return content
}
