package api

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOversizedBodyRefusedBeforeUpload: a request that announces a body over the limit
// is answered 413 from its Content-Length alone. With Expect: 100-continue (curl's way
// for bodies past 1 MB) the client must not be told to go on and upload the body, and
// without it the answer must not wait for a body the client has not sent.
func TestOversizedBodyRefusedBeforeUpload(t *testing.T) {
	const limit = 4096
	for _, expect := range []bool{true, false} {
		t.Run(fmt.Sprintf("expect=%v", expect), func(t *testing.T) {
			f := &fakeGen{script: textScript("ok", "stop")}
			h := New(f, WithLogger(discardLogger()), WithContextLength(1024), WithMaxBodyBytes(limit))
			url, srv, wait := runServer(t, h, WithLeanPaths("/v1/completions", "/v1/chat/completions"))
			defer func() {
				require.NoError(t, srv.Shutdown(context.Background()))
				require.NoError(t, wait())
			}()
			nc := guardedDial(t, strings.TrimPrefix(url, "http://"))
			defer nc.Close()
			head := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", limit+1)
			if expect {
				head += "Expect: 100-continue\r\n"
			}
			_, err := nc.Write([]byte(head + "\r\n"))
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
			require.NoError(t, err, "no answer to the head alone")
			defer resp.Body.Close()
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
			var b strings.Builder
			_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
			d := errorOf(t, response{status: resp.StatusCode, header: resp.Header, body: []byte(b.String())})
			require.Equal(t, "request_too_large", *d.Code)
			require.Zero(t, f.calls())
		})
	}
}

// TestEncodedBodyRefused: a body with a content coding (Content-Encoding: gzip) is
// refused with 415 naming the coding, on the lean front and on net/http: it was read as
// if it were plain JSON, so a gzip body got a misleading "not valid UTF-8" and a plain one
// labelled gzip was served as if the label were not there.
func TestEncodedBodyRefused(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"prompt":"hi","max_tokens":2}`))
	require.NoError(t, zw.Close())
	for _, tc := range []struct{ name, coding, body string }{
		{"gzip", "gzip", gz.String()},
		{"plain labelled gzip", "gzip", `{"prompt":"hi","max_tokens":2}`},
		{"deflate", "deflate", `{"prompt":"hi","max_tokens":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeGen{script: textScript("ok", "stop")}
			addr, _ := startLean(t, f, WithLeanPaths("/v1/completions"))
			for _, path := range []string{"/v1/completions", "/v1/chat/completions"} { // lean, net/http
				raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n%s",
					path, tc.coding, len(tc.body), tc.body)
				nc, err := net.Dial("tcp", addr)
				require.NoError(t, err)
				require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
				_, err = nc.Write([]byte(raw))
				require.NoError(t, err)
				br := bufio.NewReader(nc)
				resp, err := http.ReadResponse(br, nil)
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s: %s", path, b)
				d := errorOf(t, response{status: resp.StatusCode, header: resp.Header, body: b})
				require.Contains(t, d.Message, tc.coding)
				// The connection is still good for the next request.
				ok := `{"prompt":"hi","max_tokens":2}`
				_, err = fmt.Fprintf(nc, "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", len(ok), ok)
				require.NoError(t, err)
				resp, err = http.ReadResponse(br, nil)
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				nc.Close()
			}
			require.Equal(t, 2, f.calls(), "only the plain requests after the refusals generate")
		})
	}
}

// FuzzContentCoding: contentCoding names a coding of the header, other than identity,
// exactly when there is one.
func FuzzContentCoding(f *testing.F) {
	for _, s := range []string{"", "gzip", "identity", " Identity , gzip", ",,", "br, identity"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := contentCoding(http.Header{"Content-Encoding": {v}})
		want := false
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				want = true
			}
		}
		if (got != "") != want || (got != "" && (!strings.Contains(v, got) || strings.EqualFold(got, "identity"))) {
			t.Fatalf("contentCoding(%q) = %q", v, got)
		}
	})
}

// TestStalledBodyIs408: a body that stops short of its Content-Length until the read
// timeout is a 408 in OpenAI's shape, not a 400 invalid_request quoting the socket's
// "i/o timeout" (the request was not invalid; it never came whole).
func TestStalledBodyIs408(t *testing.T) {
	f := &fakeGen{script: textScript("ok", "stop")}
	h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
	url, srv, wait := runServer(t, h, WithReadTimeout(100*time.Millisecond))
	defer func() {
		require.NoError(t, srv.Shutdown(context.Background()))
		require.NoError(t, wait())
	}()
	nc := guardedDial(t, strings.TrimPrefix(url, "http://"))
	defer nc.Close()
	_, err := nc.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n{\"prompt\":"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s", b)
	d := errorOf(t, response{status: resp.StatusCode, header: resp.Header, body: b})
	require.Equal(t, "request_timeout", *d.Code)
	require.Zero(t, f.calls())
}
