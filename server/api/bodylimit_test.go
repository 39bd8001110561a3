package api

import (
	"bufio"
	"context"
	"fmt"
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
			nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
			head := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", limit+1)
			if expect {
				head += "Expect: 100-continue\r\n"
			}
			_, err = nc.Write([]byte(head + "\r\n"))
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
