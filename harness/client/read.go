package client

import (
	"context"
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
	st.dls.armStall()
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

// refused classifies a non-2xx answer by its error body (Refused).
func (c *Client) refused(res *Result, st *reqState, h *head, body io.Reader) *Result {
	b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	f, why := Refused(res, h.status, h.retryAfter, b)
	return c.judge(res, st, f, why)
}

// isEventStream reports whether a Content-Type header names text/event-stream.
func isEventStream(ct string) bool {
	if ct == "text/event-stream" {
		return true // the common answer, without ParseMediaType's parameter map
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// streamBuffer is the SSE reader's initial buffer: a token chunk is a few hundred
// bytes, and the buffer grows for a longer one. Held streams each keep one.
const streamBuffer = 512

// done is the stream's terminator; events after it are ignored.
const done = "[DONE]"

// readStream reads an SSE answer into an Answer, which classifies it; the end of the
// stream without [DONE] is truncated (a clean end) or connection_lost (an abrupt one).
func (c *Client) readStream(ctx context.Context, req *Request, res *Result, st *reqState, body io.Reader, obs Observer) *Result {
	r := sse.NewReader(body, sse.WithMaxLine(int(min(c.maxBody, int64(sse.DefaultMaxLine)))), sse.WithBufferSize(streamBuffer))
	a := NewAnswer(req, res, c.now)
	defer func() { res.Text = a.Text() }()
	for {
		ev, err := r.NextView() // Answer.Event keeps nothing of the data
		if err != nil {
			return c.streamEnded(ctx, res, st, err)
		}
		if ev.Comment {
			continue // keep-alives are not progress
		}
		st.dls.progress()
		step := a.Event(ev.Type, ev.Data)
		if step.Token && res.Chunks == 1 {
			c.firstToken(req, res, st, obs)
		}
		if step.Cancel {
			st.cancel(ErrClientCancel)
		}
		if step.End {
			f, why := a.Verdict()
			return c.judge(res, st, f, why)
		}
	}
}

// firstToken moves the request past its first token: the first-token deadline is met.
func (c *Client) firstToken(req *Request, res *Result, st *reqState, obs Observer) {
	st.advance(phMidStream) // the first-token deadline is met
	if obs != nil {
		obs.FirstToken(req, res.FirstToken)
	}
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
		err = LostMidStreamError(err)
	}
	return c.judge(res, st, f, err)
}

// readWhole reads a non-stream answer into an Answer, which classifies it.
func (c *Client) readWhole(ctx context.Context, req *Request, res *Result, st *reqState, body io.Reader, obs Observer) *Result {
	data, err := io.ReadAll(io.LimitReader(body, c.maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return c.classifyErr(ctx, res, st, err)
		}
		return c.judge(res, st, bodyFacts(Facts{Headers: true, Status: res.Status}, err), fmt.Errorf("client: short body: %w", err))
	}
	if int64(len(data)) > c.maxBody {
		return c.judge(res, st, Facts{Headers: true, Status: res.Status, Invalid: true}, fmt.Errorf("client: body over %d bytes", c.maxBody))
	}
	a := NewAnswer(req, res, c.now)
	step := a.Body(data)
	res.Text = a.Text()
	if step.Token && obs != nil {
		obs.FirstToken(req, res.FirstToken)
	}
	f, why := a.Verdict()
	return c.judge(res, st, f, why)
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
			f.Cancelled, why = true, CancelledError(cause)
		}
	} else if f.Headers {
		f = bodyFacts(f, err)
	}
	return c.judge(res, st, f, why)
}

// judge ends res with Classify's verdict on f (Settle), a deadline that already fired
// taking precedence (a reply that arrives while the observer inspects the server is still
// late). why explains any outcome but ok. The result is final from here: a deadline that
// goes off later finds the sentinel, so it neither inspects the server about a request
// already judged nor holds Do in waitFired (marked only in waitFired, it could do both
// between the judgement and Do's deferred calls).
func (c *Client) judge(res *Result, st *reqState, f Facts, why error) *Result {
	if !st.fired.CompareAndSwap(nil, finishedSentinel) {
		if fd := st.fired.Load(); fd != finishedSentinel {
			f.Deadline, f.DeadlinePhase, why = fd.name, fd.phase, fd.cause
		}
	}
	Settle(res, f, why, c.now())
	return res
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
