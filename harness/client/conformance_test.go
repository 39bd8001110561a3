package client

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// Stream pieces with every field a real server sends.
const (
	cRole  = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n"
	cTokA  = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n"
	cStop  = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	cUsage = `data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}` + "\n\n"
	cDone  = "data: [DONE]\n\n"
	cOK    = cRole + cTokA + cStop + cUsage + cDone
	wBody  = `{"id":"w1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`

	sseHead  = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	jsonHead = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
)

func withLength(head, body string) string {
	return head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

func gz(s string, flushEach ...string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if len(flushEach) > 0 {
		for _, p := range flushEach {
			w.Write([]byte(p))
			w.Flush() // a stream compressed event by event, as a proxy does
		}
	} else {
		w.Write([]byte(s))
	}
	w.Close()
	return b.String()
}

func zl(s string) string {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

func rawDeflate(s string) string {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.DefaultCompression)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// conformance is one case: the exact bytes a server answers with, and the outcome the
// README's classification rules give them.
type conformance struct {
	name   string
	stream bool
	raw    string
	after  rawAfter
	want   ledger.Outcome
	// https, when set, is what the net/http path (https:// targets) says where its
	// framing rules differ from the shared wire's; "-" skips the https run.
	https ledger.Outcome
}

var conformanceCases = []conformance{
	// Legal, if unusual: all ok.
	{name: "chunked with extensions and a trailer", stream: true, want: ledger.OutcomeOK,
		raw: sseHead + "Transfer-Encoding: chunked\r\n\r\n" + strings.Replace(chunked(cRole, cTokA, cStop+cUsage, cDone), "0\r\n\r\n", "0;final=1\r\nX-Trailer: t\r\n\r\n", 1)},
	{name: "chunk extension on a data chunk", stream: true, want: ledger.OutcomeOK,
		raw: sseHead + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x;name=\"v\"\r\n%s\r\n", len(cOK), cOK) + "0\r\n\r\n"},
	{name: "stream with a Content-Length", stream: true, want: ledger.OutcomeOK, raw: withLength(sseHead, cOK)},
	{name: "stream delimited by the close", stream: true, want: ledger.OutcomeOK, after: closeConn,
		raw: sseHead + "Connection: close\r\n\r\n" + cOK},
	{name: "interim 100 and 103 first", stream: true, want: ledger.OutcomeOK,
		raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + withLength(sseHead, cOK)},
	{name: "large head under the bound", stream: true, want: ledger.OutcomeOK,
		raw: withLength(sseHead+strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 40), cOK)},
	{name: "HTTP/1.0 answer", stream: true, want: ledger.OutcomeOK, after: closeConn,
		raw: "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + cOK},
	{name: "bare LF head, charset parameter", stream: true, want: ledger.OutcomeOK,
		raw: strings.ReplaceAll(withLength("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n", ""), "\r\n", "\n")[:len("HTTP/1.1 200 OK\nContent-Type: text/event-stream; charset=utf-8\nContent-Length: ")] +
			fmt.Sprintf("%d\n\n", len(cOK)) + cOK, https: "-"},
	{name: "gzip whole body", want: ledger.OutcomeOK, raw: withLength(jsonHead+"Content-Encoding: gzip\r\n", gz(wBody))},
	{name: "gzip stream, flushed per event", stream: true, want: ledger.OutcomeOK,
		raw: sseHead + "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(gz("", cRole, cTokA, cStop, cUsage, cDone))},
	{name: "deflate (zlib) whole body", want: ledger.OutcomeOK, raw: withLength(jsonHead+"Content-Encoding: deflate\r\n", zl(wBody))},
	{name: "raw deflate whole body", want: ledger.OutcomeOK, raw: withLength(jsonHead+"Content-Encoding: deflate\r\n", rawDeflate(wBody))},
	{name: "identity coding named", want: ledger.OutcomeOK, raw: withLength(jsonHead+"Content-Encoding: identity\r\n", wBody)},
	{name: "SSE with CR line ends", stream: true, want: ledger.OutcomeOK, raw: withLength(sseHead, strings.ReplaceAll(cOK, "\n", "\r"))},
	{name: "SSE with CRLF line ends", stream: true, want: ledger.OutcomeOK, raw: withLength(sseHead, strings.ReplaceAll(cOK, "\n", "\r\n"))},
	{name: "SSE data: without the space", stream: true, want: ledger.OutcomeOK, raw: withLength(sseHead, strings.ReplaceAll(cOK, "data: ", "data:"))},
	{name: "SSE comments, event, id and retry fields", stream: true, want: ledger.OutcomeOK,
		raw: withLength(sseHead, ": keep-alive\n\nretry: 1000\nid: 7\nevent: message\n"+cRole+": ping\n"+cTokA+"id: 8\n"+cStop+cUsage+cDone)},
	{name: "SSE leading BOM", stream: true, want: ledger.OutcomeOK, raw: withLength(sseHead, "\xef\xbb\xbf"+cOK)},
	{name: "SSE chunk split over two data lines", stream: true, want: ledger.OutcomeOK,
		raw: withLength(sseHead, cRole+"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\ndata: \"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"+cStop+cUsage+cDone)},
	{name: "events after [DONE] ignored", stream: true, want: ledger.OutcomeOK, raw: withLength(sseHead, cOK+"data: garbage{\n\n")},
	{name: "SSE event split across chunks mid-line", stream: true, want: ledger.OutcomeOK,
		raw: sseHead + "Transfer-Encoding: chunked\r\n\r\n" + chunked(cOK[:7], cOK[7:100], cOK[100:])},

	// Defects, classified as the README says.
	{name: "obsolete line folding", stream: true, want: ledger.OutcomeTransportError, https: ledger.OutcomeOK,
		raw: withLength(sseHead+"X-Folded: a\r\n b\r\n", cOK)},
	{name: "head over 64 KiB", stream: true, want: ledger.OutcomeTransportError, https: ledger.OutcomeOK,
		raw: withLength(sseHead+strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 70), cOK)},
	{name: "not HTTP at all", stream: true, want: ledger.OutcomeTransportError, after: closeConn, raw: "SSH-2.0-OpenSSH_9.6\r\n"},
	{name: "gzip claimed, bytes are not", want: ledger.OutcomeInvalid, raw: withLength(jsonHead+"Content-Encoding: gzip\r\n", wBody)},
	{name: "a coding never asked for", want: ledger.OutcomeInvalid, raw: withLength(jsonHead+"Content-Encoding: br\r\n", wBody)},
	{name: "gzip stream cut at a clean end", stream: true, want: ledger.OutcomeTruncated,
		raw: sseHead + "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(gz("", cRole, cTokA)[:40])},
	{name: "clean end without [DONE]", stream: true, want: ledger.OutcomeTruncated,
		raw: sseHead + "Transfer-Encoding: chunked\r\n\r\n" + chunked(cRole, cTokA, cStop)},
	{name: "clean end mid-event", stream: true, want: ledger.OutcomeTruncated, raw: withLength(sseHead, cRole+cTokA+"data: {\"id\"")},
	{name: "whole body without finish_reason", want: ledger.OutcomeTruncated,
		raw: withLength(jsonHead, strings.Replace(wBody, `"stop"`, "null", 1))},
	{name: "closed mid-chunk", stream: true, want: ledger.OutcomeConnectionLost, after: closeConn,
		raw: sseHead + "Transfer-Encoding: chunked\r\n\r\n" + strings.TrimSuffix(chunked(cRole, cTokA, cStop), "0\r\n\r\n")},
	{name: "reset mid-stream", stream: true, want: ledger.OutcomeConnectionLost, after: resetConn,
		raw: sseHead + "Transfer-Encoding: chunked\r\n\r\n" + strings.TrimSuffix(chunked(cRole, cTokA), "0\r\n\r\n")},
	{name: "whole body shorter than its length", want: ledger.OutcomeConnectionLost, after: closeConn,
		raw: jsonHead + "Content-Length: 500\r\n\r\n" + wBody},
	{name: "malformed chunk size", stream: true, want: ledger.OutcomeInvalid, https: ledger.OutcomeConnectionLost,
		raw: sseHead + "Transfer-Encoding: chunked\r\n\r\n" + chunked(cRole)[:len(chunked(cRole))-5] + "zz\r\n"},
	{name: "stream id changes: two streams crossed", stream: true, want: ledger.OutcomeInvalid,
		raw: withLength(sseHead, cRole+strings.Replace(cTokA, `"c1"`, `"c2"`, 1)+cStop+cDone)},
	{name: "choice index out of range", stream: true, want: ledger.OutcomeInvalid,
		raw: withLength(sseHead, cRole+strings.Replace(cTokA, `"index":0`, `"index":1`, 1)+cStop+cDone)},
	{name: "object of another endpoint", stream: true, want: ledger.OutcomeInvalid,
		raw: withLength(sseHead, strings.ReplaceAll(cOK, "chat.completion.chunk", "text_completion"))},
	{name: "usage below the chunks received", stream: true, want: ledger.OutcomeInvalid,
		raw: withLength(sseHead, cRole+cTokA+cTokA+cStop+cUsage+cDone)},
	{name: "whole JSON to a stream request", stream: true, want: ledger.OutcomeInvalid, raw: withLength(jsonHead, wBody)},
	{name: "error event", stream: true, want: ledger.OutcomeStreamError,
		raw: withLength(sseHead, cRole+"event: error\ndata: {\"error\":{\"message\":\"decode failed\"}}\n\n")},
	{name: "503 with Retry-After", want: ledger.OutcomeRejected,
		raw: withLength("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Type: application/json\r\n", `{"error":{"message":"busy"}}`)},
	{name: "500", want: ledger.OutcomeHTTPError, raw: withLength("HTTP/1.1 500 Internal Server Error\r\n", "boom")},
	{name: "closed before any byte", stream: true, want: ledger.OutcomeTransportError, after: closeConn, raw: ""},
}

// TestConformance runs every case against its own in-process server, over the shared
// HTTP/1.1 wire (http://) and over net/http (https://): legal-but-unusual answers are
// ok, defects get the outcome the README gives them.
func TestConformance(t *testing.T) {
	for _, tc := range conformanceCases {
		for _, tlsOn := range []bool{false, true} {
			want := tc.want
			if tlsOn && tc.https != "" {
				if tc.https == "-" {
					continue
				}
				want = tc.https
			}
			name := tc.name + map[bool]string{false: " (http)", true: " (https)"}[tlsOn]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv := newRawServer(t, tlsOn, func(int) (string, rawAfter) { return tc.raw, tc.after })
				c, err := New(srv.url, WithTLS(&tls.Config{InsecureSkipVerify: true}))
				require.NoError(t, err)
				defer c.CloseIdleConnections()
				res := c.Do(context.Background(), &Request{ID: "conf", Model: "ref", Stream: tc.stream,
					Messages: []Message{{Role: "user", Content: "hi"}}, Deadlines: dl}, nil)
				require.Equal(t, want, res.Outcome, "err %q", res.Err)
				if want != ledger.OutcomeOK {
					assert.NotEmpty(t, res.Err)
				}
				if want == ledger.OutcomeRejected {
					assert.Equal(t, "2", res.RetryAfter)
				}
				if srv.requests() > 0 {
					assert.Equal(t, "identity", srv.seen[0].Get("Accept-Encoding"), "the client asks for no coding")
				}
			})
		}
	}
}
