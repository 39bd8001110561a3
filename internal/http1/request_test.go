package http1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every caller header is sent (a traceparent, an Authorization), a request header
// replaces a default of the same name, the writer's own headers cannot be replaced, and
// net/http reads the result back as written.
func TestAppendRequest(t *testing.T) {
	msg, err := AppendRequest(nil, &Request{Method: "POST", Host: "h:1", Path: "/v1/x", ContentType: "application/json",
		Accept: "text/event-stream", RequestID: "r-1", Body: []byte(`{"a":1}`),
		Defaults: http.Header{"Authorization": {"Bearer d"}, "X-Route": {"a"}},
		Header:   http.Header{"X-Route": {"b"}, "traceparent": {"00-1-2-01"}, "Host": {"evil"}, "Content-Length": {"0"}}})
	require.NoError(t, err)
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(msg)))
	require.NoError(t, err)
	body, _ := io.ReadAll(req.Body)
	assert.Equal(t, `{"a":1}`, string(body))
	assert.Equal(t, "h:1", req.Host)
	assert.Equal(t, "Bearer d", req.Header.Get("Authorization"))
	assert.Equal(t, []string{"b"}, req.Header.Values("X-Route"), "the request's header replaces the default")
	assert.Equal(t, "00-1-2-01", req.Header.Get("Traceparent"))
	assert.Equal(t, "identity", req.Header.Get("Accept-Encoding"))
	assert.Equal(t, "r-1", req.Header.Get("X-Request-Id"))
	assert.Equal(t, "pdsoak", req.Header.Get("User-Agent"))

	_, err = AppendRequest(nil, &Request{Method: "POST", Host: "h", Path: "/", Header: http.Header{"Authorization": {"Bearer s3cret\r\nX: 1"}}})
	require.ErrorIs(t, err, ErrInvalidHeader)
	assert.NotContains(t, err.Error(), "s3cret", "a value is never shown")
}

// FuzzAppendRequest: whatever headers a caller passes, the writer either refuses them
// (never showing a value) or writes a request net/http reads back with those headers.
func FuzzAppendRequest(f *testing.F) {
	f.Add("Authorization", "Bearer x", "body")
	f.Add("X-Bad Name", "v", "")
	f.Add("X-A", "line\r\nbreak", "b")
	f.Fuzz(func(t *testing.T, name, value, body string) {
		msg, err := AppendRequest(nil, &Request{Method: "POST", Host: "h", Path: "/p", Header: http.Header{name: {value}}, Body: []byte(body)})
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidHeader)
			if len(value) > 16 { // a short value may be a word of the message itself
				require.NotContains(t, err.Error(), value)
			}
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(msg)))
		require.NoError(t, err, "%q", msg)
		got, _ := io.ReadAll(req.Body)
		require.Equal(t, body, string(got))
		if !owned(http.CanonicalHeaderKey(name)) && name != "User-Agent" {
			require.Equal(t, strings.Trim(value, " \t"), req.Header.Get(name))
		}
	})
}

// TestAppendRequestTraceParent: the traceparent field is written as a header, a Header
// entry of the same name wins over it, and a value with a line break is refused.
func TestAppendRequestTraceParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	base := Request{Method: "POST", Host: "h", Path: "/p", TraceParent: tp}
	b, err := AppendRequest(nil, &base)
	require.NoError(t, err)
	assert.Contains(t, string(b), "\r\nTraceparent: "+tp+"\r\n")

	own := base
	own.Header = http.Header{"Traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}}
	b, err = AppendRequest(nil, &own)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), "Traceparent:"), "the workload's own header wins")
	assert.NotContains(t, string(b), tp)

	bad := base
	bad.TraceParent = "x\r\nEvil: 1"
	_, err = AppendRequest(nil, &bad)
	require.ErrorIs(t, err, ErrInvalidHeader)
}
