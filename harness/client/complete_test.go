package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// Exact bytes for the completeness rules.
const (
	ctSSE  = "text/event-stream"
	ctJSON = "application/json"

	role    = `data: {"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n"
	tokA    = `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n"
	tokB    = `data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}` + "\n\n"
	stop    = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	tokStop = `data: {"choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"length"}]}` + "\n\n"
	usage2  = `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}` + "\n\n"
	usage1  = `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}` + "\n\n"
	doneEv  = "data: [DONE]\n\n"

	wholeOK = `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1,"completion_tokens":1}}`
)

// TestCompleteness has one case per rule of "ok means a complete response": the server
// sends exactly the given bytes with the given Content-Type.
func TestCompleteness(t *testing.T) {
	tests := []struct {
		name        string
		rule        string
		stream      bool
		contentType string
		body        string
		want        ledger.Outcome
		errHas      string
	}{
		// Stream requested.
		{name: "stream: finish_reason then [DONE] is ok", rule: "stream ok",
			stream: true, contentType: ctSSE, body: role + tokA + tokB + stop + usage2 + doneEv, want: ledger.OutcomeOK},
		{name: "stream: finish_reason on the last content chunk is ok", rule: "stream ok",
			stream: true, contentType: ctSSE, body: tokA + tokStop + doneEv, want: ledger.OutcomeOK},
		{name: "stream: Content-Type with parameters is SSE", rule: "stream ok",
			stream: true, contentType: "text/event-stream; charset=utf-8", body: tokA + stop + doneEv, want: ledger.OutcomeOK},
		{name: "stream: anything after [DONE] is ignored", rule: "after [DONE]",
			stream: true, contentType: ctSSE, body: tokA + stop + doneEv + "data: {not json\n\nevent: error\ndata: x\n\n", want: ledger.OutcomeOK},
		{name: "stream: [DONE] without finish_reason is truncated", rule: "no finish_reason",
			stream: true, contentType: ctSSE, body: tokA + tokB + doneEv, want: ledger.OutcomeTruncated, errHas: "finish_reason"},
		{name: "stream: usage but no finish_reason is truncated", rule: "no finish_reason",
			stream: true, contentType: ctSSE, body: tokA + tokB + usage2 + doneEv, want: ledger.OutcomeTruncated, errHas: "finish_reason"},
		{name: "stream: finish_reason then EOF without [DONE] is truncated", rule: "no [DONE]",
			stream: true, contentType: ctSSE, body: tokA + stop, want: ledger.OutcomeTruncated, errHas: "[DONE]"},
		{name: "stream: EOF with neither is truncated", rule: "no [DONE]",
			stream: true, contentType: ctSSE, body: tokA, want: ledger.OutcomeTruncated, errHas: "[DONE]"},
		{name: "stream: EOF inside an event is truncated", rule: "no [DONE]",
			stream: true, contentType: ctSSE, body: tokA + `data: {"choices":[{"delta":{"content":"b`, want: ledger.OutcomeTruncated},
		{name: "stream: whole JSON completion is invalid", rule: "not SSE",
			stream: true, contentType: ctJSON, body: wholeOK, want: ledger.OutcomeInvalid, errHas: "text/event-stream"},
		{name: "stream: SSE bytes without the SSE Content-Type are invalid", rule: "not SSE",
			stream: true, contentType: "text/plain", body: tokA + stop + doneEv, want: ledger.OutcomeInvalid, errHas: "text/event-stream"},
		// No stream.
		{name: "whole: choices with finish_reason is ok", rule: "whole ok",
			contentType: ctJSON, body: wholeOK, want: ledger.OutcomeOK},
		{name: "whole: completions text with finish_reason is ok", rule: "whole ok",
			contentType: ctJSON, body: `{"choices":[{"text":"hi","finish_reason":"length"}]}`, want: ledger.OutcomeOK},
		{name: "whole: no choices is invalid", rule: "whole choices",
			contentType: ctJSON, body: `{"id":"x","choices":[]}`, want: ledger.OutcomeInvalid, errHas: "no choices"},
		{name: "whole: not an object is invalid", rule: "whole choices",
			contentType: ctJSON, body: `[1,2]`, want: ledger.OutcomeInvalid},
		{name: "whole: a choice without finish_reason is truncated", rule: "whole finish_reason",
			contentType: ctJSON, body: `{"choices":[{"text":"a","finish_reason":"stop"},{"text":"b","finish_reason":null}]}`,
			want: ledger.OutcomeTruncated, errHas: "choice 1"},
		// Usage agrees with what arrived.
		{name: "stream: usage equal to the content chunks is ok", rule: "usage",
			stream: true, contentType: ctSSE, body: tokA + tokB + stop + usage2 + doneEv, want: ledger.OutcomeOK},
		{name: "stream: usage below the content chunks is invalid", rule: "usage",
			stream: true, contentType: ctSSE, body: tokA + tokB + stop + usage1 + doneEv, want: ledger.OutcomeInvalid, errHas: "usage"},
		{name: "whole: zero completion tokens for content is invalid", rule: "usage",
			contentType: ctJSON, body: `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":0}}`,
			want: ledger.OutcomeInvalid, errHas: "usage"},
		{name: "whole: no usage is not checked", rule: "usage",
			contentType: ctJSON, body: `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`, want: ledger.OutcomeOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c, err := New(srv.URL)
			require.NoError(t, err)
			defer c.CloseIdleConnections()
			res := c.Do(context.Background(), &Request{ID: "c", Model: "ref", Stream: tt.stream, MaxTokens: 4,
				Messages: []Message{{Role: "user", Content: "x"}}, Deadlines: dl}, nil)
			require.Equal(t, tt.want, res.Outcome, "rule %q: err %q", tt.rule, res.Err)
			if tt.want == ledger.OutcomeOK {
				assert.Empty(t, res.Err)
				assert.NotEmpty(t, res.FinishReason)
			} else {
				assert.Contains(t, res.Err, tt.errHas)
				assert.True(t, strings.HasPrefix(res.Err, "client: "), "error %q lacks the package prefix", res.Err)
			}
		})
	}
}

// BenchmarkStreamChunks measures the classifier's per-chunk cost.
func BenchmarkStreamChunks(b *testing.B) {
	body := role + strings.Repeat(tokA, 256) + stop + `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":256}}` + "\n\n" + doneEv
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctSSE)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	require.NoError(b, err)
	defer c.CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		res := c.Do(context.Background(), &Request{ID: "b", Model: "ref", Stream: true, Deadlines: dl}, nil)
		if res.Outcome != ledger.OutcomeOK {
			b.Fatal(res.Err)
		}
	}
}

// FuzzClassify feeds arbitrary bodies to the stream and whole-body classifiers: they
// never panic, always decide an outcome, and call nothing ok that lacks a finish_reason
// (or, for a stream, [DONE]).
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		role + tokA + tokB + stop + usage2 + doneEv, tokA + tokB + doneEv, tokA + stop, tokA + stop + usage1 + doneEv,
		wholeOK, `{"choices":[{"text":"a","finish_reason":null}]}`, "event: error\ndata: x\n\n", ": c\n\n", "data: [DONE]\n\n",
	} {
		f.Add(s)
	}
	c, err := New("http://127.0.0.1:1")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body string) {
		for _, stream := range []bool{true, false} {
			ctx, cancel := context.WithCancelCause(context.Background())
			st := &reqState{cancel: cancel}
			req := &Request{ID: "f", Stream: stream}
			var res *Result
			if stream {
				res = c.readStream(ctx, req, &Result{Status: 200}, st, strings.NewReader(body), nil)
			} else {
				res = c.readWhole(ctx, req, &Result{Status: 200}, st, strings.NewReader(body), nil)
			}
			cancel(nil)
			require.NotEmpty(t, res.Outcome)
			if res.Outcome == ledger.OutcomeOK {
				require.NotEmpty(t, res.FinishReason, "ok without a finish_reason")
				if stream {
					require.Contains(t, body, done, "ok stream without [DONE]")
				}
			} else {
				require.NotEmpty(t, res.Err, "%s without a reason", res.Outcome)
			}
		}
	})
}
