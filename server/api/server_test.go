package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// runServer serves h with opts on a loopback listener; stop shuts it down and waits.
func runServer(t *testing.T, h http.Handler, opts ...ServerOption) (url string, srv *Server, wait func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv = NewServer(h, append([]ServerOption{WithServerLogger(discardLogger())}, opts...)...)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), srv, func() error { return <-errc }
}

func TestSlowLorisIsCut(t *testing.T) {
	f := &fakeGen{script: textScript("ok", "stop")}
	h := New(f, WithLogger(discardLogger()))
	url, srv, wait := runServer(t, h, WithReadHeaderTimeout(200*time.Millisecond))
	defer func() {
		_ = srv.Shutdown(context.Background())
		_ = wait()
	}()

	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	// Dribble a header one byte every 20 ms for up to 20 s; the server must hang up long
	// before the request is complete.
	header := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 1000) + "\r\n\r\n"
	closed := make(chan error, 1)
	go func() {
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := io.ReadAll(conn)
		closed <- err
	}()
	sent := 0
	for ; sent < len(header); sent++ {
		if _, err := conn.Write([]byte{header[sent]}); err != nil {
			break
		}
		select {
		case err := <-closed:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("client read timed out: the server never closed the slow connection")
			}
			if sent >= len(header)-1 {
				t.Fatal("the whole header got through")
			}
			// Still serving normal clients.
			if r := do(t, "GET", url+"/health", "", nil); r.status != 200 {
				t.Fatalf("health after slow loris: %d", r.status)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("connection still open after %d of %d header bytes", sent, len(header))
}

func TestShutdownLetsRequestsFinish(t *testing.T) {
	release := make(chan struct{})
	f := &fakeGen{started: make(chan struct{}, 1), script: func(e *emitter) {
		if !e.send(gen.Event{Tokens: []int{'a'}}) {
			return
		}
		if !e.await(release) {
			return
		}
		e.send(gen.Event{Tokens: []int{'b'}})
		e.send(gen.Event{Done: true, Finish: "stop"})
	}}
	h := New(f, WithLogger(discardLogger()))
	url, srv, wait := runServer(t, h, WithShutdownGrace(time.Minute)) // the request finishes well inside

	got := make(chan response, 1)
	go func() { got <- post(t, url+"/v1/completions", `{"prompt":"x","stream":true}`) }()
	<-f.started
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- srv.Shutdown(context.Background()) }()
	waitRefused(t, strings.TrimPrefix(url, "http://"))
	close(release)
	r := <-got
	events := readSSE(t, r.body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("in-flight request did not finish: %v", events)
	}
	require.NoError(t, <-shutdownDone)
	require.NoError(t, wait())
	f.wg.Wait()
}

func TestShutdownAbortsStuckRequests(t *testing.T) {
	f := &fakeGen{started: make(chan struct{}, 2), script: func(e *emitter) {
		if e.req.MaxTokens == 2 { // the streaming one starts, then hangs
			if !e.send(gen.Event{Tokens: []int{'a'}}) {
				return
			}
		}
		e.hang()
	}}
	h := New(f, WithLogger(discardLogger()))
	url, srv, wait := runServer(t, h, WithShutdownGrace(100*time.Millisecond), WithAbortWait(10*time.Second))

	streamed := make(chan response, 1)
	whole := make(chan response, 1)
	go func() { streamed <- post(t, url+"/v1/completions", `{"prompt":"x","stream":true,"max_tokens":2}`) }()
	go func() { whole <- post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":3}`) }()
	<-f.started
	<-f.started
	require.NoError(t, srv.Shutdown(context.Background()))
	r := <-streamed
	events := readSSE(t, r.body)
	var er ErrorResponse
	if last := events[len(events)-1]; json.Unmarshal([]byte(last), &er) != nil || er.Error.Type != "unavailable" {
		t.Fatalf("aborted stream should end with an unavailable error event: %v", events)
	}
	r = <-whole
	if r.status != 503 || errorOf(t, r).Type != "unavailable" {
		t.Fatalf("aborted request before headers: %d %s", r.status, r.body)
	}
	require.NoError(t, wait())
	f.wg.Wait()
}

func TestServeStopsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, ln, New(&fakeGen{}, WithLogger(discardLogger())), WithServerLogger(discardLogger()))
	}()
	if r := do(t, "GET", "http://"+ln.Addr().String()+"/health", "", nil); r.status != 200 {
		t.Fatalf("health: %d", r.status)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestGeneratorThatIgnoresCancel(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck) // before the cleanup waits for the generator, even when the test fails
	f := &fakeGen{started: make(chan struct{}, 1), script: func(e *emitter) {
		// Never honours ctx, not even for the first token (on a loaded machine the abort
		// can come before it, and a cooperative send would then end the request cleanly):
		// the handler must still end the request, with an error after the token.
		e.ch <- gen.Event{Tokens: []int{'a'}}
		<-stuck
	}}
	srv, h := startServer(t, f, WithAbortGrace(50*time.Millisecond))
	got := make(chan response, 1)
	go func() { got <- post(t, srv.URL+"/v1/completions", `{"prompt":"x","stream":true}`) }()
	<-f.started
	h.Abort()
	r := <-got
	if strings.Contains(string(r.body), "[DONE]") || !strings.Contains(string(r.body), "internal_error") {
		t.Fatalf("want an internal error event: status %d: %s", r.status, r.body)
	}
}

// TestStalledReaderIsCut: a client that stops reading a stream must not hold the handler
// (and the generation) forever.
func TestStalledReaderIsCut(t *testing.T) {
	f := &fakeGen{started: make(chan struct{}, 1), script: func(e *emitter) {
		tok := make([]int, 512)
		for i := range tok {
			tok[i] = 'x'
		}
		for e.send(gen.Event{Tokens: tok}) {
		}
	}}
	srv, h := startServer(t, f, WithWriteStall(100*time.Millisecond), WithContextLength(1<<22))
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"prompt":"x","stream":true,"max_tokens":4000000}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	<-f.started
	// Never read. The handler must give up and cancel the generation.
	deadline := time.After(time.Minute) // a hang guard
	for f.abortCount() == 0 || h.InFlight() != 0 {
		select {
		case <-deadline:
			t.Fatalf("stalled reader still holds the request (aborts %d, in flight %d)", f.abortCount(), h.InFlight())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestFinalFlushDeadlineClearedForTheNextRequest: a response whose last bytes are left to
// the server's own flush keeps its write deadline set on the connection past the handler
// (writeGuard.keepForFinalFlush); the next request on that connection must not inherit
// it, however late it comes (net/http clears it after that flush).
func TestFinalFlushDeadlineClearedForTheNextRequest(t *testing.T) {
	const stall = 20 * time.Millisecond
	tests := []struct {
		name, path, body string
	}{
		{"worker stream", "/generate", `{"rid":"a","input_ids":[256,1],"sampling_params":{"max_new_tokens":3}}`},
		{"openai stream", "/v1/completions", `{"model":"ref","prompt":"hi","max_tokens":3,"stream":true}`},
		{"openai whole", "/v1/completions", `{"model":"ref","prompt":"hi","max_tokens":3}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeGen{script: textScript("hey", "stop")}
			h := New(f, WithLogger(discardLogger()), WithWriteStall(stall))
			url, srv, wait := runServer(t, h)
			defer func() {
				_ = srv.Shutdown(context.Background())
				_ = wait()
			}()
			tr := &http.Transport{MaxConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: time.Minute}
			var conns []net.Conn
			var reused []bool
			send := func(method, path, body string) int {
				trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
					conns, reused = append(conns, i.Conn), append(reused, i.Reused)
				}}
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method, url+path, strings.NewReader(body))
				require.NoError(t, err)
				resp, err := client.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				_, err = io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode
			}
			require.Equal(t, 200, send(http.MethodPost, tc.path, tc.body))
			// The deadline the stream left must be long past when the next request comes.
			time.Sleep(5 * stall)
			require.Equal(t, 200, send(http.MethodGet, "/health", ""))
			require.Equal(t, 200, send(http.MethodPost, tc.path, tc.body))
			require.Equal(t, []bool{false, true, true}, reused)
			require.True(t, conns[0] == conns[1] && conns[1] == conns[2], "one connection for all three requests")
		})
	}
}

// waitRefused waits until addr refuses connections: a shutdown has begun (poll: Shutdown
// runs concurrently). Only a refusal counts: a dial that is merely slow on a loaded
// machine is not one.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			return errors.Is(err, syscall.ECONNREFUSED)
		}
		c.Close()
		return false
	}, time.Minute, 2*time.Millisecond, "listener still accepting during shutdown")
}
