package api

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// TestLeanPartialNextHeadSparesResponse: bytes of a next request's head (or body) that
// arrive while a response is in progress are not yet being read as net/http counts it:
// its read-header and read timeouts start when that response ends. The reaper cut the
// connection, and the stream in progress with it, once a partial head had waited past
// the read-header timeout (a client that pipelines, or sends a stray byte after its body).
func TestLeanPartialNextHeadSparesResponse(t *testing.T) {
	for _, next := range []string{
		"POST /generate HTTP/1.1\r\n",                    // a head begun
		genReq("b", okBody)[:len(genReq("b", okBody))-5], // a head whole, its body begun
	} {
		release := make(chan struct{})
		f := &fakeGen{started: make(chan struct{}, 4), script: func(e *emitter) {
			if !e.send(gen.Event{Tokens: []int{'a'}}) || !e.await(release) {
				return
			}
			e.send(gen.Event{Done: true, Finish: "stop"})
		}}
		h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
		url, srv, wait := runServer(t, h, WithLeanGenerate(), WithReadHeaderTimeout(50*time.Millisecond),
			WithReadTimeout(50*time.Millisecond))
		addr := strings.TrimPrefix(url, "http://")
		nc := guardedDial(t, addr)
		_, err := nc.Write([]byte(genReq("hold", okBody)))
		require.NoError(t, err)
		<-f.started
		br := bufio.NewReader(nc)
		resp, err := http.ReadResponse(br, nil) // the stream has begun
		require.NoError(t, err)
		_, err = nc.Write([]byte(next))
		require.NoError(t, err)
		require.Eventually(t, func() bool { // the reader has the partial request in hand
			srv.lean.mu.Lock()
			defer srv.lean.mu.Unlock()
			for c := range srv.lean.conns {
				if s := c.state.Load(); c.pending.Load() == 1 && (s == readHead || s == readBody) {
					return true
				}
			}
			return false
		}, time.Minute, time.Millisecond)

		// A head begun later, cut for its read-header timeout: the reaper has swept since
		// the partial request waited past its timeouts too.
		requireSlowHeadCut(t, addr)

		close(release)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err, "the response in progress was cut (%q so far)", b)
		require.Contains(t, string(b), `"done":true`)
		require.Zero(t, f.abortCount())
		nc.Close()
		require.NoError(t, srv.Shutdown(context.Background()))
		require.NoError(t, wait())
		f.wg.Wait()
	}
}

// guardedDial connects to addr with a one-minute guard on every read and write, so a
// server that never answers fails the test instead of hanging it.
func guardedDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute)))
	return nc
}

// requireSlowHeadCut begins a head on a new connection and waits for the server to cut
// it for its read-header timeout: proof that the reaper has swept since then.
func requireSlowHeadCut(t *testing.T, addr string) {
	t.Helper()
	slow := guardedDial(t, addr)
	_, err := slow.Write([]byte("POST /generate HTTP/1.1\r\n"))
	require.NoError(t, err)
	_, err = io.ReadAll(slow)
	var ne net.Error
	require.False(t, errorAs(err, &ne) && ne.Timeout(), "the slow head was never cut")
	slow.Close()
}
