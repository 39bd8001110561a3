package client

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// data is the data of one SSE event line of the test constants.
func data(ev string) string {
	return strings.TrimSuffix(strings.TrimPrefix(ev, "data: "), "\n\n")
}

// fakeClock advances a second at every reading.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

// TestAnswerStepsAStream feeds an Answer a stream's events on an injected clock, as the
// simulator does: tokens are timed by that clock, and the step says what the driver
// does (the first token, the end) without any transport.
func TestAnswerStepsAStream(t *testing.T) {
	clk := &fakeClock{t: time.Unix(100, 0)}
	req := &Request{ID: "a", Stream: true}
	res := &Result{Status: 200}
	a := NewAnswer(req, res, clk.now)
	assert.Equal(t, Step{}, a.Event("", data(role)), "the role chunk has no content")
	assert.Equal(t, Step{Token: true}, a.Event("", data(tokA)))
	assert.Equal(t, time.Unix(101, 0), res.FirstToken)
	assert.Equal(t, Step{Token: true}, a.Event("", data(tokB)))
	assert.Equal(t, []time.Duration{time.Second}, res.ITL)
	assert.Equal(t, Step{}, a.Event("", data(stop)))
	assert.Equal(t, Step{}, a.Event("", data(usage2)))
	assert.Equal(t, Step{End: true}, a.Event("", "[DONE]"))
	f, why := a.Verdict()
	Settle(res, f, why, clk.now())
	assert.Equal(t, ledger.OutcomeOK, res.Outcome)
	assert.Empty(t, res.Err)
	assert.Equal(t, "ab", a.Text())
	assert.Equal(t, 2, res.Chunks)
	assert.Equal(t, "stop", res.FinishReason)
	assert.Equal(t, 2, res.CompletionTokens)
}

// TestAnswerEnds has one case per way a step ends an answer.
func TestAnswerEnds(t *testing.T) {
	for _, tt := range []struct {
		name   string
		req    Request
		events []string // "error:" prefix: an event of type error
		want   Step     // the last event's step
		out    ledger.Outcome
		errHas string
	}{
		{name: "cancel after k tokens", req: Request{Stream: true, CancelAfterTokens: 2},
			events: []string{tokA, tokB}, want: Step{Token: true, Cancel: true, End: true}, out: ledger.OutcomeCancelled, errHas: "on purpose"},
		{name: "error object", req: Request{Stream: true},
			events: []string{tokA, `data: {"error":{"message":"boom"}}`}, want: Step{End: true}, out: ledger.OutcomeStreamError, errHas: "boom"},
		{name: "error event", req: Request{Stream: true},
			events: []string{"error:oops"}, want: Step{End: true}, out: ledger.OutcomeStreamError, errHas: "oops"},
		{name: "unparseable", req: Request{Stream: true},
			events: []string{"{nope"}, want: Step{End: true}, out: ledger.OutcomeInvalid, errHas: "unparseable chunk"},
		{name: "no finish before [DONE]", req: Request{Stream: true},
			events: []string{tokA, doneEv}, want: Step{End: true}, out: ledger.OutcomeTruncated, errHas: "without a finish_reason"},
		{name: "usage under the chunks", req: Request{Stream: true},
			events: []string{tokA, tokB, stop, usage1, doneEv}, want: Step{End: true}, out: ledger.OutcomeInvalid, errHas: "usage says 1"},
		{name: "two streams crossed", req: Request{Stream: true},
			events: []string{`data: {"id":"x","choices":[]}`, `data: {"id":"y","choices":[]}`}, want: Step{End: true}, out: ledger.OutcomeInvalid, errHas: "crossed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(100, 0)}
			res := &Result{Status: 200}
			a := NewAnswer(&tt.req, res, clk.now)
			var st Step
			for i, ev := range tt.events {
				typ, d := "", data(ev)
				if rest, ok := strings.CutPrefix(ev, "error:"); ok {
					typ, d = "error", rest
				}
				st = a.Event(typ, d)
				if i < len(tt.events)-1 {
					require.False(t, st.End, "event %d ended the answer early", i)
				}
			}
			assert.Equal(t, tt.want, st)
			f, why := a.Verdict()
			Settle(res, f, why, clk.now())
			assert.Equal(t, tt.out, res.Outcome)
			assert.Contains(t, res.Err, tt.errHas)
		})
	}
}

// TestAnswerBody: a whole body is one step that always ends the answer; a body with
// content is its first token.
func TestAnswerBody(t *testing.T) {
	clk := &fakeClock{t: time.Unix(100, 0)}
	res := &Result{Status: 200}
	a := NewAnswer(&Request{}, res, clk.now)
	assert.Equal(t, Step{Token: true, End: true}, a.Body([]byte(wholeOK)))
	f, why := a.Verdict()
	Settle(res, f, why, clk.now())
	assert.Equal(t, ledger.OutcomeOK, res.Outcome)
	assert.Equal(t, "hi", a.Text())
	assert.Equal(t, time.Unix(101, 0), res.FirstToken)

	res = &Result{Status: 200}
	a = NewAnswer(&Request{}, res, clk.now)
	assert.Equal(t, Step{Token: true, End: true}, a.Body([]byte(`{"choices":[{"message":{"content":"x"}}]}`)))
	f, why = a.Verdict()
	Settle(res, f, why, clk.now())
	assert.Equal(t, ledger.OutcomeTruncated, res.Outcome)
}

// TestRefused: 429 and 503 keep their Retry-After, other statuses are HTTP errors; the
// message is the OpenAI error's, or the body.
func TestRefusedFacts(t *testing.T) {
	res := &Result{}
	f, why := Refused(res, 429, "2", []byte(`{"error":{"message":"queue full","type":"overloaded"}}`))
	assert.Equal(t, ledger.OutcomeRejected, Classify(f).Outcome)
	assert.Equal(t, "2", res.RetryAfter)
	assert.EqualError(t, why, "client: status 429: queue full")
	res = &Result{}
	f, why = Refused(res, 500, "2", []byte("  plain\n"))
	assert.Equal(t, ledger.OutcomeHTTPError, Classify(f).Outcome)
	assert.Empty(t, res.RetryAfter)
	assert.EqualError(t, why, "client: status 500: plain")
}

// FuzzAnswer feeds an Answer arbitrary events (one a line; "error:" makes an error
// event): it never panics, never ends twice, and calls nothing ok that lacks a
// finish_reason or a [DONE].
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		data(role) + "\n" + data(tokA) + "\n" + data(stop) + "\n" + data(usage1) + "\n[DONE]",
		data(tokA) + "\n[DONE]", "error:x", `{"error":{"message":"m"}}`, "{", `{"choices":[{"index":3}]}`,
	} {
		f.Add(s, 0)
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, body string, cancelAfter int) {
		clk := &fakeClock{t: time.Unix(100, 0)}
		req := &Request{Stream: true, CancelAfterTokens: cancelAfter % 4}
		res := &Result{Status: 200}
		a := NewAnswer(req, res, clk.now)
		ended, sawDone := false, false
		for _, line := range strings.Split(body, "\n") {
			typ, d := "", line
			if rest, ok := strings.CutPrefix(line, "error:"); ok {
				typ, d = "error", rest
			}
			sawDone = sawDone || strings.TrimSpace(d) == "[DONE]"
			st := a.Event(typ, d)
			if st.Token { // a token is counted and timed
				require.Positive(t, res.Chunks)
				require.False(t, res.FirstToken.IsZero())
			}
			if st.End {
				ended = true
				break
			}
		}
		if !ended {
			return
		}
		f, why := a.Verdict()
		Settle(res, f, why, clk.now())
		require.NotEmpty(t, res.Outcome)
		if res.Outcome == ledger.OutcomeOK {
			require.NotEmpty(t, res.FinishReason, "ok without a finish_reason")
			require.True(t, sawDone, "ok without [DONE]")
			require.Empty(t, res.Err)
		} else {
			require.NotEmpty(t, res.Err, "%s without a reason", res.Outcome)
		}
	})
}
