package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"

	"pdsoak/internal/http1"
	"pdsoak/ledger"
	"pdsoak/sse"
)

// head is what the classifier uses of a response head, from either transport.
type head struct {
	status                                   int
	contentType, contentEncoding, retryAfter string
}

// afterHead is the one step both transports (doH1, doHTTP) take once a response head
// arrived: it records the head, classifies an error status, undoes a content coding, and
// reads the stream or the whole body. wait is the body's sse.ReadableWaiter (h1) or nil.
func (c *Client) afterHead(ctx context.Context, req *Request, res *Result, st *reqState, obs Observer, h *head, cb *countingReader, wait sse.ReadableWaiter) *Result {
	st.advance(phBeforeFirstToken)
	res.Headers = c.now()
	res.Status = h.status
	if obs != nil {
		obs.Headers(req, res.Headers, h.status)
	}
	if h.status < 200 || h.status > 299 {
		return c.refused(res, st, h, cb)
	}
	var body io.Reader = cb
	if ce := h.contentEncoding; ce != "" && !strings.EqualFold(ce, "identity") {
		d, err := newDecoder(ce, cb)
		if err != nil {
			return c.judge(res, st, Facts{Headers: true, Status: h.status, Invalid: true}, err)
		}
		body, wait = d, nil // the decoder buffers: the stream keeps its read buffer
	}
	if !req.Stream {
		return c.readWhole(ctx, req, res, st, body, obs)
	}
	if !isEventStream(h.contentType) {
		// A whole JSON completion (or anything else) is not the stream that was asked for.
		return c.judge(res, st, Facts{Headers: true, Status: h.status, Invalid: true},
			fmt.Errorf("client: stream requested, answer is %q, not text/event-stream", h.contentType))
	}
	if st.connect != nil {
		st.connect.Stop()
	}
	if req.Deadlines.Stall > 0 {
		st.stall = time.AfterFunc(req.Deadlines.Stall, c.fire(req, st, obs, ErrStallDeadline, "stall", nil))
	}
	if wait != nil {
		body = waitingReader{body, wait}
	}
	return c.readStream(ctx, req, res, st, body, obs)
}

// waitingReader is a stream body for the SSE reader that can wait for input without a
// buffer (sse.ReadableWaiter).
type waitingReader struct {
	io.Reader
	w sse.ReadableWaiter
}

func (r waitingReader) WaitReadable() error { return r.w.WaitReadable() }

// refused classifies a non-2xx answer: 429 and 503 are explicit refusals, the rest
// HTTP errors.
func (c *Client) refused(res *Result, st *reqState, h *head, body io.Reader) *Result {
	msg := c.readError(body)
	f := Facts{Headers: true, Status: h.status}
	if v := Classify(f); v.Outcome == ledger.OutcomeRejected {
		res.RetryAfter = h.retryAfter
	}
	return c.judge(res, st, f, fmt.Errorf("client: status %d: %s", h.status, msg))
}

// isEventStream reports whether a Content-Type header names text/event-stream.
func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

func (c *Client) readError(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
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
			res.FinishReason = c.FinishReason
			rcv.finished = true
		}
	}
	return content
}

// ended classifies a response whose protocol end arrived ([DONE], or the whole body):
// ok, or truncated without a finish_reason, or invalid when usage disagrees.
func (c *Client) ended(res *Result, st *reqState, rcv *received, finished bool, suffix string) *Result {
	f := Facts{Headers: true, Status: res.Status, End: EndClean, Done: true, Finished: finished,
		UsageSent: rcv.usage, CompletionTokens: res.CompletionTokens, Pieces: rcv.pieces}
	var why error
	switch Classify(f).Outcome {
	case ledger.OutcomeTruncated:
		why = errors.New("client: response ended without a finish_reason" + suffix)
	case ledger.OutcomeInvalid:
		why = fmt.Errorf("client: usage says %d completion tokens, %d content chunks arrived%s", res.CompletionTokens, rcv.pieces, suffix)
	}
	return c.judge(res, st, f, why)
}

// streamBuffer is the SSE reader's initial buffer: a token chunk is a few hundred
// bytes, and the buffer grows for a longer one. Held streams each keep one.
const streamBuffer = 512

// done is the stream's terminator; events after it are ignored.
const done = "[DONE]"

// readStream classifies an SSE answer: ok needs a chunk with a finish_reason, then
// [DONE]; the end of the stream without [DONE] is truncated (a clean end) or
// connection_lost (an abrupt one).
func (c *Client) readStream(ctx context.Context, req *Request, res *Result, st *reqState, body io.Reader, obs Observer) *Result {
	r := sse.NewReader(body, sse.WithMaxLine(int(min(c.maxBody, int64(sse.DefaultMaxLine)))), sse.WithBufferSize(streamBuffer))
	var text strings.Builder
	defer func() { res.Text = text.String() }()
	var rcv received
	var last time.Time
	bad := Facts{Headers: true, Status: res.Status, Invalid: true}
	var ch chunk // on the stack: decodeChunk resets it
	for {
		ch = chunk{} // nothing of the last event is held while the stream waits
		ev, err := r.Next()
		if err != nil {
			return c.streamEnded(ctx, res, st, err)
		}
		if ev.Comment {
			continue // keep-alives are not progress
		}
		if st.stall != nil {
			st.stall.Reset(req.Deadlines.Stall)
		}
		if strings.TrimSpace(ev.Data) == done {
			return c.ended(res, st, &rcv, rcv.finished, " (stream sent [DONE])")
		}
		if err := decodeChunk(ev.Data, &ch); err != nil {
			if ev.Type == "error" {
				return c.judge(res, st, Facts{Headers: true, Status: res.Status, StreamError: true}, fmt.Errorf("client: error event: %s", trim(ev.Data)))
			}
			return c.judge(res, st, bad, fmt.Errorf("client: unparseable chunk %q: %w", trim(ev.Data), err))
		}
		if ev.Type == "error" || ch.hasError() {
			msg := trim(ev.Data)
			if ch.hasError() {
				msg = ch.errText()
			}
			return c.judge(res, st, Facts{Headers: true, Status: res.Status, StreamError: true}, fmt.Errorf("client: error event: %s", msg))
		}
		if err := rcv.check(&ch, req); err != nil {
			return c.judge(res, st, bad, err)
		}
		content := ch.apply(res, &rcv)
		if content == "" {
			continue
		}
		rcv.pieces++
		last = c.token(req, res, st, obs, last)
		text.WriteString(content)
		if req.CancelAfterTokens > 0 && res.Chunks >= req.CancelAfterTokens {
			st.cancel(ErrClientCancel)
			return c.classifyErr(ctx, res, st, ErrClientCancel)
		}
	}
}

// token records one content chunk's arrival (first token, inter-token gap) and returns
// its time.
func (c *Client) token(req *Request, res *Result, st *reqState, obs Observer, last time.Time) time.Time {
	now := c.now()
	res.Chunks++
	if !res.FirstToken.IsZero() {
		res.ITL = append(res.ITL, now.Sub(last))
		return now
	}
	res.FirstToken = now
	st.advance(phMidStream)
	if st.first != nil {
		st.first.Stop()
		st.first = nil // a held stream need not keep a spent timer
	}
	if obs != nil {
		obs.FirstToken(req, now)
	}
	return now
}

// bodyFacts adds what a body read error says to f: a protocol violation (malformed
// framing, an undecodable coding, an oversized line) is invalid; otherwise the body
// ended cleanly (EOF, or a compressed body cut short at a clean end) or abruptly.
func bodyFacts(f Facts, err error) Facts {
	switch {
	case errors.Is(err, http1.ErrMalformed), errors.Is(err, errCoding), errors.Is(err, sse.ErrLineTooLong):
		f.Invalid = true
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, sse.ErrUnexpectedEOF), errors.Is(err, errCodingShort):
		f.End = EndClean
	default:
		f.End = EndAbrupt
	}
	return f
}

// streamEnded classifies a stream that ended before [DONE]: a deadline or a
// cancellation when one caused it; invalid for a protocol violation; otherwise truncated
// at a clean end (even after a finish_reason: the protocol's end is [DONE]) and
// connection_lost at an abrupt one.
func (c *Client) streamEnded(ctx context.Context, res *Result, st *reqState, err error) *Result {
	if ctx.Err() != nil {
		return c.classifyErr(ctx, res, st, err)
	}
	f := bodyFacts(Facts{Headers: true, Status: res.Status}, err)
	switch {
	case f.Invalid:
		err = fmt.Errorf("client: %w", err)
	case f.End == EndClean:
		err = errors.New("client: stream ended without [DONE]")
	default:
		err = fmt.Errorf("client: connection lost mid-stream, no [DONE]: %w", err)
	}
	return c.judge(res, st, f, err)
}

// readWhole classifies a non-stream answer: ok needs a JSON object whose choices all
// carry a finish_reason.
func (c *Client) readWhole(ctx context.Context, req *Request, res *Result, st *reqState, body io.Reader, obs Observer) *Result {
	data, err := io.ReadAll(io.LimitReader(body, c.maxBody+1))
	bad := Facts{Headers: true, Status: res.Status, Invalid: true}
	if err != nil {
		if ctx.Err() != nil {
			return c.classifyErr(ctx, res, st, err)
		}
		return c.judge(res, st, bodyFacts(Facts{Headers: true, Status: res.Status}, err), fmt.Errorf("client: short body: %w", err))
	}
	if int64(len(data)) > c.maxBody {
		return c.judge(res, st, bad, fmt.Errorf("client: body over %d bytes", c.maxBody))
	}
	var ch chunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return c.judge(res, st, bad, fmt.Errorf("client: unparseable body %q: %w", trim(string(data)), err))
	}
	if ch.hasError() {
		return c.judge(res, st, Facts{Headers: true, Status: res.Status, StreamError: true}, fmt.Errorf("client: error in body: %s", ch.errText()))
	}
	if len(ch.Choices) == 0 {
		return c.judge(res, st, bad, errors.New("client: body has no choices"))
	}
	var rcv received
	if err := rcv.check(&ch, req); err != nil {
		return c.judge(res, st, bad, err)
	}
	res.Text = ch.apply(res, &rcv)
	now := c.now()
	res.FirstToken = now
	res.Chunks = 1
	if obs != nil {
		obs.FirstToken(req, now)
	}
	for i, chc := range ch.Choices {
		if chc.FinishReason == "" {
			return c.judge(res, st, Facts{Headers: true, Status: res.Status, Done: true},
				fmt.Errorf("client: choice %d of the body has no finish_reason", i))
		}
		if chc.Delta.Content+chc.Message.Content+chc.Text != "" {
			rcv.pieces++
		}
	}
	return c.ended(res, st, &rcv, true, "")
}

// classifyErr turns a transport or read error into an outcome, preferring the
// deadline that fired, then the cancellation, over the error they caused.
func (c *Client) classifyErr(ctx context.Context, res *Result, st *reqState, err error) *Result {
	f := Facts{Phase: phaseNames[st.phase.Load()], Headers: !res.Headers.IsZero(), Status: res.Status}
	why := fmt.Errorf("client: %w", err)
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrClientCancel):
			f.ClientAbort, why = true, cause
		case errors.Is(cause, ErrTotalDeadline): // the hard backstop past the total deadline
			f.Deadline, f.DeadlinePhase, why = "total", f.Phase, cause
		default:
			f.Cancelled, why = true, fmt.Errorf("client: cancelled: %w", cause)
		}
	} else if f.Headers {
		f = bodyFacts(f, err)
	}
	return c.judge(res, st, f, why)
}

// judge ends res with Classify's verdict on f, a deadline that already fired taking
// precedence (a reply that arrives while the observer inspects the server is still
// late). why explains any outcome but ok.
func (c *Client) judge(res *Result, st *reqState, f Facts, why error) *Result {
	if fd := st.fired.Load(); fd != nil && fd != finishedSentinel {
		f.Deadline, f.DeadlinePhase, why = fd.name, fd.phase, fd.cause
	}
	v := Classify(f)
	res.Phase = v.Phase
	if v.Outcome == ledger.OutcomeOK {
		why = nil
	}
	return c.finish(res, v.Outcome, v.Deadline, why)
}

func (c *Client) finish(res *Result, o ledger.Outcome, deadline string, err error) *Result {
	res.Outcome = o
	res.Deadline = deadline
	if err != nil {
		res.Err = err.Error()
	}
	res.End = c.now()
	return res
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// errDrained cancels a drain that took longer than the drain grace (the result is final).
var errDrained = errors.New("client: drained")

// drain reads what is left of a finished body (anything after [DONE] is ignored), for at
// most grace: a body closed before EOF costs its connection, and a new dial per request.
func drain(body io.Reader, cancel context.CancelCauseFunc, grace time.Duration) {
	t := time.AfterFunc(grace, func() { cancel(errDrained) })
	defer t.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 256<<10))
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
