package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// bytesConn is a net.Conn that reads raw and then reports the connection's end.
type bytesConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *bytesConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *bytesConn) SetReadDeadline(time.Time) error { return nil }
func (c *bytesConn) SetDeadline(time.Time) error     { return nil }
func (c *bytesConn) Close() error                    { return nil }

// theirs is net/http's reading of raw: the final response (1xx skipped, as ours does) and
// its body, or the error that stopped it.
func theirs(raw []byte) (resp *http.Response, body []byte, headErr, bodyErr error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		resp, headErr = http.ReadResponse(br, nil)
		if headErr != nil {
			return nil, nil, headErr, nil
		}
		if resp.StatusCode >= 200 || resp.StatusCode == 101 {
			break
		}
	}
	body, bodyErr = io.ReadAll(resp.Body)
	return resp, body, nil, bodyErr
}

// ours is the shared wire's reading of raw.
func ours(raw []byte) (h Head, body []byte, headErr, bodyErr error) {
	read := ReadResponse
	if len(raw)%2 == 1 {
		read = ReadResponsePooled // both readers, and pooled buffers reused across inputs
	}
	h, b, headErr := read(&bytesConn{r: bytes.NewReader(raw)})
	if headErr != nil {
		return h, nil, headErr, nil
	}
	body, bodyErr = io.ReadAll(b)
	return h, body, nil, bodyErr
}

// knownStricter lists heads the shared wire refuses on purpose where net/http accepts
// them: obsolete line folding (RFC 9112 §5.2 lets a client refuse it), a status line
// that is not "HTTP/1.x NNN[ reason]", a transfer coding other than chunked, a signed or
// padded Content-Length.
func knownStricter(raw []byte, err error) bool {
	if errors.Is(err, ErrObsFold) || errors.Is(err, ErrHeadTooLarge) {
		return true
	}
	st, _, _ := bytes.Cut(raw, []byte("\n"))
	msg := err.Error()
	switch {
	case !errors.Is(err, ErrMalformed):
		return false
	case strings.Contains(msg, "status line") && !bytes.HasPrefix(st, []byte("HTTP/1.")):
		return true // a version other than HTTP/1.x
	case strings.Contains(msg, "header line"):
		return true // a field name that is not a token (RFC 9110 §5.1), e.g. "Name :"
	}
	return false
}

// knownLaxer: heads net/http refuses that the shared wire reads, because it reads only
// the fields it uses and ignores the rest (a malformed field value, a duplicate
// Content-Type, a header name net/http's textproto refuses for a reason that does not
// change the framing).
func knownLaxer(theirErr error) bool {
	s := theirErr.Error()
	for _, k := range []string{"malformed MIME header", "invalid header", "too many", "malformed HTTP response", "malformed HTTP status code",
		"unsupported transfer encoding", "bad Content-Length", "invalid Trailer key", "too many transfer encodings"} {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

// FuzzReadResponseAgainstNetHTTP is the differential test of the response-head parser
// and the body framing (chunked, Content-Length, close-delimited) against net/http's
// ReadResponse: wherever both read a head they agree on the status, the framing and the
// close decision; wherever both read a body to its end they read the same bytes; a body
// one of them reads to a clean end the other does not is a disagreement. Heads only
// one of them accepts must be one of the documented differences.
func FuzzReadResponseAgainstNetHTTP(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
		"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello",
		"HTTP/1.0 200 OK\r\n\r\nto the end",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 503 Busy\r\nRetry-After: 2\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZ\r\n",
		"HTTP/1.0 200 \nTrAnsfer-EnCoding:Chunked\n\n00000", // found by this fuzzer: HTTP/1.0 is never chunked
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 8<<10 {
			return
		}
		h, ob, oHeadErr, oBodyErr := ours(raw)
		resp, tb, tHeadErr, tBodyErr := theirs(raw)
		switch {
		case oHeadErr != nil && tHeadErr != nil:
			return
		case oHeadErr != nil:
			if !knownStricter(raw, oHeadErr) {
				t.Fatalf("only net/http reads the head; ours: %v\n%q", oHeadErr, raw)
			}
			return
		case tHeadErr != nil:
			if !knownLaxer(tHeadErr) {
				t.Fatalf("only ours reads the head; net/http: %v\n%q", tHeadErr, raw)
			}
			return
		}
		if h.Status != resp.StatusCode {
			t.Fatalf("status %d, net/http %d\n%q", h.Status, resp.StatusCode, raw)
		}
		if h.Chunked != (len(resp.TransferEncoding) > 0) && resp.StatusCode != 204 && resp.StatusCode != 304 {
			t.Fatalf("chunked %v, net/http %v\n%q", h.Chunked, resp.TransferEncoding, raw)
		}
		if oBodyErr == nil && tBodyErr == nil && !bytes.Equal(ob, tb) {
			t.Fatalf("body %q, net/http %q\n%q", ob, tb, raw)
		}
		if (oBodyErr == nil) != (tBodyErr == nil) {
			t.Fatalf("body end: ours %v, net/http %v\n%q", oBodyErr, tBodyErr, raw)
		}
		if oBodyErr == nil && h.Close != resp.Close && h.Length >= 0 {
			t.Fatalf("close %v, net/http %v\n%q", h.Close, resp.Close, raw)
		}
	})
}
