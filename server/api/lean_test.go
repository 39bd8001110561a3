package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/internal/http1"
	"pdsoak/server/gen"
)

// genReq is a raw POST /generate as the router writes it.
func genReq(rid, body string, extra ...string) string {
	return "POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: pdsoak-router\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + fmt.Sprint(len(body)) + "\r\nAccept: text/event-stream\r\nAccept-Encoding: identity\r\n" +
		"X-Request-Id: " + rid + "\r\n" + strings.Join(extra, "") + "\r\n" + body
}

const okBody = `{"input_ids":[256,1],"sampling_params":{"max_new_tokens":2}}`

// recConn records what is read from it.
type recConn struct {
	net.Conn
	got bytes.Buffer
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.got.Write(p[:n])
	return n, err
}

var (
	dateLine = regexp.MustCompile(`\r\nDate: [^\r]*\r\n`)
	created  = regexp.MustCompile(`"created":[0-9]+`)
)

// exchange sends reqs one after the other on one connection to addr and returns each
// raw response (Date values blanked); a request the server closed the connection
// before answering reads "closed".
func exchange(t *testing.T, addr string, reqs ...string) []string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
	rc := &recConn{Conn: nc}
	var out []string
	for _, r := range reqs {
		rc.got.Reset()
		if _, err := nc.Write([]byte(r)); err != nil {
			out = append(out, "closed")
			continue
		}
		_, body, err := http1.ReadResponse(rc)
		if err != nil {
			out = append(out, "closed")
			continue
		}
		_, err = io.Copy(io.Discard, body)
		require.NoError(t, err)
		raw := dateLine.ReplaceAllString(rc.got.String(), "\r\nDate: X\r\n")
		out = append(out, created.ReplaceAllString(raw, `"created":0`))
	}
	return out
}

// TestLeanWritesWhatNetHTTPWrites: the same handler answers the same requests with the
// same bytes, behind net/http and behind the lean /generate server: streams, refusals,
// errors before and after headers, a body over net/http's 2 KiB buffer, Connection:
// close, keep-alive, and requests the lean server hands to net/http.
func TestLeanWritesWhatNetHTTPWrites(t *testing.T) {
	long := fmt.Errorf("api: %s: %w", strings.Repeat("too busy ", 300), gen.ErrUnavailable)
	midErr := func(e *emitter) {
		if e.send(gen.Event{Tokens: []int{'a'}}) {
			e.send(gen.Event{Done: true, Err: fmt.Errorf("engine: held too long: %w", gen.ErrTimeout)})
		}
	}
	oai := func(path, rid, body string, extra ...string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1:30000\r\nUser-Agent: pdsoak\r\nContent-Type: application/json\r\n" +
			"Content-Length: " + fmt.Sprint(len(body)) + "\r\nX-Request-Id: " + rid + "\r\n" + strings.Join(extra, "") + "\r\n" + body
	}
	const chat = `{"model":"ref","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`
	for _, tc := range []struct {
		name   string
		script func(*emitter)
		refuse error
		reqs   []string
		openai bool // the OpenAI endpoints on the lean server too (the router's front end)
	}{
		{"stream", textScript("hi", "stop"), nil, []string{genReq("r1", okBody)}, false},
		{"keep-alive", textScript("hey", "length"), nil, []string{genReq("r1", okBody), genReq("r2", okBody), genReq("r3", `{"rid":"own","input_ids":[256,1],"sampling_params":{"max_new_tokens":2}}`)}, false},
		{"bad json", nil, nil, []string{genReq("r1", `{"input_ids":[256,`), genReq("r2", `{}`), genReq("r3", `{"input_ids":[256],"sampling_params":{"max_new_tokens":0}}`)}, false},
		{"refused", nil, &gen.OverloadError{RetryAfter: 2 * time.Second}, []string{genReq("r1", okBody)}, false},
		{"long refusal", nil, long, []string{genReq("r1", okBody), genReq("r2", okBody)}, false},
		{"error mid-stream", midErr, nil, []string{genReq("r1", okBody)}, false},
		{"connection close", textScript("x", "stop"), nil, []string{genReq("r1", okBody, "Connection: close\r\n"), genReq("r2", okBody)}, false},
		{"then net/http", textScript("x", "stop"), nil, []string{genReq("r1", okBody), "GET /health HTTP/1.1\r\nHost: h\r\nX-Request-Id: h1\r\n\r\n", genReq("r2", okBody)}, false},
		{"CRLF after a POST", textScript("x", "stop"), nil, []string{genReq("r1", okBody) + "\r\n", genReq("r2", okBody), "\r\n\n" + genReq("r3", okBody)}, false},
		{"CRLFs before a first request", nil, nil, []string{"\r\n" + genReq("r1", okBody)}, false},
		{"wrong method", nil, nil, []string{"PUT /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nX-Request-Id: p\r\n\r\n"}, false},
		{"malformed", nil, nil, []string{genReq("r1", okBody, "Bad Header: x\r\n")}, false},
		{"too large", nil, nil, []string{genReq("r1", strings.Repeat(" ", 5000)+okBody)}, false},
		{"chunked body", textScript("x", "stop"), nil, []string{"POST /generate HTTP/1.1\r\nHost: h\r\nX-Request-Id: c\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(okBody), okBody)}, false},
		{"openai", textScript("hello world", "stop"), nil, []string{
			oai("/v1/completions", "c1", `{"model":"ref","prompt":"hi","max_tokens":16}`),
			oai("/v1/completions", "c2", `{"model":"ref","prompt":"hi","max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`),
			oai("/v1/completions", "c3", `{"model":"ref","prompt":"hi","max_tokens":16,"stream":true,"stop":["wor"]}`),
			oai("/v1/chat/completions", "c4", chat),
			oai("/v1/chat/completions", "c5", chat[:len(chat)-1]+`,"stream":true}`),
			oai("/v1/chat/completions", "c6", `{"model":"nope","messages":[]}`),
			oai("/v1/models", "c7", ``),
		}, true},
		{"openai refused", nil, &gen.OverloadError{RetryAfter: time.Second}, []string{
			oai("/v1/completions", "r1", `{"model":"ref","prompt":"hi","stream":true}`),
			oai("/v1/chat/completions", "r2", chat, "Connection: close\r\n"),
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2][]string
			for i, lean := range []bool{false, true} {
				f := &fakeGen{script: tc.script, refuse: tc.refuse}
				h := New(f, WithLogger(discardLogger()), WithContextLength(1024), WithMaxBodyBytes(4096))
				var opts []ServerOption
				if lean {
					opts = append(opts, WithLeanGenerate())
					if tc.openai {
						opts = append(opts, WithLeanPaths("/v1/completions", "/v1/chat/completions"))
					}
				}
				url, srv, wait := runServer(t, h, opts...)
				got[i] = exchange(t, strings.TrimPrefix(url, "http://"), tc.reqs...)
				require.NoError(t, srv.Shutdown(context.Background()))
				require.NoError(t, wait())
				f.wg.Wait()
			}
			require.Len(t, got[1], len(tc.reqs))
			for i := range got[0] {
				require.Equal(t, got[0][i], got[1][i], "response %d: net/http, then lean", i)
			}
		})
	}
}

// startLean serves a handler of f behind the lean server.
func startLean(t *testing.T, f *fakeGen, opts ...ServerOption) (addr string, h *Handler) {
	t.Helper()
	h = New(f, WithLogger(discardLogger()), WithContextLength(1024))
	url, srv, wait := runServer(t, h, append([]ServerOption{WithLeanGenerate()}, opts...)...)
	t.Cleanup(func() {
		require.NoError(t, srv.Shutdown(context.Background()))
		require.NoError(t, wait())
		f.wg.Wait()
	})
	return strings.TrimPrefix(url, "http://"), h
}

// TestLeanDroppedLegAborts: the router drops a leg by closing its connection. The
// generation must be aborted whether the worker has written tokens or nothing at all
// (decode waiting for its KV), which net/http's background read did and the lean
// server's parked reader does.
func TestLeanDroppedLegAborts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(*emitter)
		openai bool // the first round is a streamed completion (the router's front end)
	}{
		{"nothing written", func(e *emitter) { e.hang() }, false},
		{"mid-stream", func(e *emitter) {
			if e.send(gen.Event{Tokens: []int{'a'}}) {
				e.hang()
			}
		}, false},
		{"openai", func(e *emitter) {
			if e.send(gen.Event{Tokens: []int{'a'}}) {
				e.hang()
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeGen{started: make(chan struct{}, 4), script: func(e *emitter) {
				if e.req.ID == "served" {
					e.text("ok", "stop")
					return
				}
				tc.script(e)
			}}
			addr, h := startLean(t, f, WithLeanPaths("/v1/completions"))
			for round := range 2 { // the second on a connection that served a request before
				nc, err := net.Dial("tcp", addr)
				require.NoError(t, err)
				if round == 1 {
					_, err = nc.Write([]byte(genReq("served", okBody)))
					require.NoError(t, err)
					<-f.started
					_, body, err := http1.ReadResponse(nc)
					require.NoError(t, err)
					b, err := io.ReadAll(body)
					require.NoError(t, err)
					require.Contains(t, string(b), `"done":true`)
				}
				before := f.abortCount()
				req := genReq("drop", okBody)
				if round == 0 && tc.openai {
					body := `{"prompt":"x","stream":true}`
					req = fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
				_, err = nc.Write([]byte(req))
				require.NoError(t, err)
				<-f.started
				require.NoError(t, nc.Close())
				deadline := time.After(time.Minute) // a hang guard
				for f.abortCount() == before || h.InFlight() != 0 {
					select {
					case <-deadline:
						t.Fatalf("generation not aborted after the leg was dropped (aborts %d, in flight %d)", f.abortCount(), h.InFlight())
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
		})
	}
}

// bodyOf is the decoded body of a raw response.
func bodyOf(t *testing.T, raw string) []byte {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

// TestLeanKeepsConnections: many requests on one connection, each answered in full;
// /health in between moves the connection to net/http, which keeps serving /generate.
func TestLeanKeepsConnections(t *testing.T) {
	f := &fakeGen{script: textScript("ok", "stop")}
	addr, _ := startLean(t, f)
	var reqs []string
	for i := range 50 {
		reqs = append(reqs, genReq(fmt.Sprint("k", i), okBody))
	}
	reqs = append(reqs, "GET /health HTTP/1.1\r\nHost: h\r\n\r\n", genReq("after", okBody))
	for i, r := range exchange(t, addr, reqs...) {
		require.NotEqual(t, "closed", r, "request %d", i)
		if i < 50 || i == 51 {
			require.Contains(t, r, "HTTP/1.1 200 OK\r\n", "request %d", i)
			require.Contains(t, r, `"done":true`, "request %d", i)
		}
	}
	require.Equal(t, 51, f.calls(), "every /generate reached the generator")
}

// TestLeanIdleAndSlowConnectionsAreCut: the reaper closes a connection idle past the
// idle timeout and one whose head dribbles past the read-header timeout.
func TestLeanIdleAndSlowConnectionsAreCut(t *testing.T) {
	f := &fakeGen{script: textScript("ok", "stop")}
	addr, _ := startLean(t, f, WithIdleTimeout(50*time.Millisecond), WithReadHeaderTimeout(50*time.Millisecond))
	for _, tc := range []struct{ name, send string }{
		{"idle", genReq("i", okBody)},
		{"slow head", "POST /generate HTTP/1.1\r\nHost: h\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetReadDeadline(time.Now().Add(time.Minute))) // a hang guard
			_, err = nc.Write([]byte(tc.send))
			require.NoError(t, err)
			_, err = io.ReadAll(nc) // the response, if any, then the server's close
			var ne net.Error
			require.False(t, errorAs(err, &ne) && ne.Timeout(), "the server never closed the connection")
		})
	}
}

func errorAs(err error, ne *net.Error) bool {
	if err == nil {
		return false
	}
	e, ok := err.(net.Error)
	if ok {
		*ne = e
	}
	return ok
}

// TestLeanShutdown: a /generate in flight finishes within the grace; one that does not
// is aborted with an error event, as behind net/http.
func TestLeanShutdown(t *testing.T) {
	release := make(chan struct{})
	f := &fakeGen{started: make(chan struct{}, 2), script: func(e *emitter) {
		if !e.send(gen.Event{Tokens: []int{'a'}}) {
			return
		}
		if e.req.ID == "stuck" {
			e.hang()
			return
		}
		if !e.await(release) {
			return
		}
		e.send(gen.Event{Done: true, Finish: "stop"})
	}}
	h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
	url, srv, wait := runServer(t, h, WithLeanGenerate(), WithShutdownGrace(time.Minute))
	addr := strings.TrimPrefix(url, "http://")
	got := make(chan []string, 1)
	go func() { got <- exchange(t, addr, genReq("fin", okBody), genReq("next", okBody)) }()
	<-f.started
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	waitRefused(t, addr) // shutdown has begun
	close(release)
	r := <-got
	require.Contains(t, r[0], `"done":true`)
	require.Contains(t, r[0], `"finish_reason":"stop"`)
	require.Equal(t, "closed", r[1], "the connection ends with its response during shutdown")
	require.NoError(t, <-done)
	require.NoError(t, wait())
	f.wg.Wait()

	f2 := &fakeGen{started: make(chan struct{}, 1), script: f.script}
	h2 := New(f2, WithLogger(discardLogger()), WithContextLength(1024))
	url, srv, wait = runServer(t, h2, WithLeanGenerate(), WithShutdownGrace(50*time.Millisecond), WithAbortWait(time.Minute))
	go func() {
		got <- exchange(t, strings.TrimPrefix(url, "http://"), genReq("stuck", `{"rid":"stuck","input_ids":[256,1],"sampling_params":{"max_new_tokens":2}}`))
	}()
	<-f2.started
	require.NoError(t, srv.Shutdown(context.Background()))
	r = <-got
	var last gen.WorkerChunk
	events := readSSE(t, bodyOf(t, r[0]))
	require.NoError(t, json.Unmarshal([]byte(events[len(events)-1]), &last), "%q", r[0])
	require.NotNil(t, last.Error, "an aborted stream ends with an error chunk: %q", r[0])
	require.Equal(t, "unavailable", last.Error.Kind)
	require.NoError(t, wait())
	f2.wg.Wait()
}

// FuzzLeanAgainstNetHTTP: any request (method, target, extra header lines, body) gets
// the same answer from the lean server as from net/http for the same handler: status,
// fields but Date, framing and body. Heads the lean server declines reach net/http
// through the hand-off, so malformed ones are answered by net/http's own 400s.
func FuzzLeanAgainstNetHTTP(f *testing.F) {
	var addrs [2]string
	for i, lean := range []bool{false, true} {
		g := &fakeGen{script: textScript("ok", "stop")}
		h := New(g, WithLogger(discardLogger()), WithContextLength(1024), WithMaxBodyBytes(4096))
		opts := []ServerOption{WithServerLogger(discardLogger())}
		if lean {
			opts = append(opts, WithLeanGenerate())
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(f, err)
		srv := NewServer(h, opts...)
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		f.Cleanup(func() { _ = srv.Shutdown(context.Background()); <-errc; g.wg.Wait() })
		addrs[i] = ln.Addr().String()
	}
	for _, s := range [][4]string{
		{"POST", "/generate", "X-Request-Id: a\r\n", okBody},
		{"POST", "/generate", "X-Request-Id: a\r\nConnection: close\r\n", `{"input_ids":[]}`},
		{"POST", "/generate", "X-Request-Id: a\r\nX-Request-Id: b\r\nTraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n", okBody},
		{"POST", "/generate", "Bad Header : x\r\n", okBody},
		{"POST", "/generate", "X-Request-Id: a\r\nExpect: 100-continue\r\n", okBody},
		{"GET", "/generate", "X-Request-Id: a\r\n", ""},
		{"POST", "/v1/completions", "X-Request-Id: a\r\n", `{"prompt":"x"}`},
		{"POST", "/generate?x=1", "X-Request-Id: a\r\n", okBody},
		{"POST", "/generate", "X-Request-Id: a\r\nContent-Type: text/plain\r\nAccept: */*\r\n", strings.Repeat("x", 5000)},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, method, target, fields, body string) {
		lower := strings.ToLower(fields)
		if len(fields) > 2048 || len(body) > 8192 || strings.Contains(method+target, "\n") ||
			strings.Contains(lower, "content-length") || strings.Contains(lower, "transfer-encoding") {
			return // framing of its own: both servers wait for bytes that never come (declined heads are net/http's anyway)
		}
		raw := method + " " + target + " HTTP/1.1\r\nHost: h\r\n" + fields + "Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body
		var got [2]string
		for i, addr := range addrs {
			got[i] = answer(t, addr, raw)
		}
		if got[0] != got[1] {
			t.Fatalf("net/http and lean differ for %q:\n%s\n---\n%s", raw, got[0], got[1])
		}
	})
}

// answer sends raw on a fresh connection and describes the first response: status,
// fields but Date, framing and body ("closed" when none came).
func answer(t *testing.T, addr, raw string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
	if _, err := nc.Write([]byte(raw)); err != nil {
		return "closed"
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		return "closed"
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "closed"
	}
	resp.Header.Del("Date")
	if rid := resp.Header.Get("X-Request-Id"); rid != "" && !strings.Contains(raw, rid) {
		resp.Header.Set("X-Request-Id", "random") // the handler drew one: the request had none usable
		b = bytes.ReplaceAll(b, []byte(rid), []byte("random"))
	}
	var sb strings.Builder
	_ = resp.Header.Write(&sb)
	return fmt.Sprintf("%s\n%s%v %d %v\n%s", resp.Status, sb.String(), resp.TransferEncoding, resp.ContentLength, resp.Close, created.ReplaceAll(b, []byte(`"created":0`)))
}

// TestLeanPipelinedHandOff: a request for net/http pipelined behind a /generate in
// progress waits for it: the generation is not cancelled by the hand-off (the reader
// ends there), its answer is whole, and net/http answers the next one after it.
func TestLeanPipelinedHandOff(t *testing.T) {
	release := make(chan struct{})
	f := &fakeGen{started: make(chan struct{}, 1), script: func(e *emitter) {
		select {
		case <-release:
			e.text("ok", "stop")
		case <-e.ctx.Done():
			e.abort()
		}
	}}
	h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
	url, srv, wait := runServer(t, h, WithLeanGenerate())
	defer func() {
		require.NoError(t, srv.Shutdown(context.Background()))
		require.NoError(t, wait())
		f.wg.Wait()
	}()
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
	_, err = nc.Write([]byte(genReq("first", okBody) + "GET /health HTTP/1.1\r\nHost: h\r\n\r\n"))
	require.NoError(t, err)
	<-f.started
	require.Eventually(t, func() bool { // the reader has handed the connection over and ended
		srv.lean.mu.Lock()
		defer srv.lean.mu.Unlock()
		for c := range srv.lean.conns {
			if c.state.Load() == readDone {
				return true
			}
		}
		return false
	}, time.Minute, time.Millisecond)
	close(release)
	br := bufio.NewReader(nc)
	for i, want := range []string{`"finish_reason":"stop"`, `"status":"ok"`} {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err, "response %d", i)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Contains(t, string(b), want, "response %d", i)
	}
	require.Zero(t, f.abortCount())
}

// TestLeanPipelinedOutliveHeaderTimeout: requests pipelined behind a long response are
// read whole and wait for the server goroutine; the read-header timeout is not theirs
// (net/http reads none of them until the response ends), so the reaper must not cut the
// connection, and the response in progress with it, once they have waited that long.
func TestLeanPipelinedOutliveHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	f := &fakeGen{started: make(chan struct{}, 4), script: func(e *emitter) {
		if e.req.ID != "hold" {
			e.text("ok", "stop")
			return
		}
		if !e.send(gen.Event{Tokens: []int{'a'}}) {
			return
		}
		if !e.await(release) {
			return
		}
		e.send(gen.Event{Done: true, Finish: "stop"})
	}}
	h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
	url, srv, wait := runServer(t, h, WithLeanGenerate(), WithReadHeaderTimeout(50*time.Millisecond))
	defer func() {
		require.NoError(t, srv.Shutdown(context.Background()))
		require.NoError(t, wait())
		f.wg.Wait()
	}()
	addr := strings.TrimPrefix(url, "http://")
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
	_, err = nc.Write([]byte(genReq("hold", okBody) + genReq("b", okBody) + genReq("c", okBody)))
	require.NoError(t, err)
	<-f.started
	require.Eventually(t, func() bool { // "b" waits in the channel, "c" in the reader's hand
		srv.lean.mu.Lock()
		defer srv.lean.mu.Unlock()
		for c := range srv.lean.conns {
			if c.pending.Load() == 3 {
				return true
			}
		}
		return false
	}, time.Minute, time.Millisecond)

	// A head begun after "c" was read, cut for its read-header timeout: the reaper has
	// swept since "c" waited past that timeout too.
	requireSlowHeadCut(t, addr)

	close(release)
	br := bufio.NewReader(nc)
	for _, rid := range []string{"hold", "b", "c"} {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err, "response %s", rid)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err, "response %s", rid)
		require.Contains(t, string(b), `"finish_reason":"stop"`, "response %s", rid)
	}
	require.Zero(t, f.abortCount())
}

// TestLeanShutdownCutsSlowHead: a head begun before a shutdown is still bound by the
// read-header timeout while the shutdown waits (as net/http's read deadline bounds it),
// so it cannot hold the shutdown for the whole grace and abort wait.
func TestLeanShutdownCutsSlowHead(t *testing.T) {
	f := &fakeGen{script: textScript("ok", "stop")}
	h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
	url, srv, wait := runServer(t, h, WithLeanGenerate(), WithReadHeaderTimeout(50*time.Millisecond),
		WithShutdownGrace(10*time.Minute), WithAbortWait(10*time.Minute))
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
	_, err = nc.Write([]byte("POST /generate HTTP/1.1\r\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the head has begun
		srv.lean.mu.Lock()
		defer srv.lean.mu.Unlock()
		for c := range srv.lean.conns {
			if c.state.Load() == readHead {
				return true
			}
		}
		return false
	}, time.Minute, time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	_, err = io.ReadAll(nc)
	var ne net.Error
	require.False(t, errorAs(err, &ne) && ne.Timeout(), "the slow head was not cut during the shutdown")
	require.NoError(t, <-done)
	require.NoError(t, wait())
}

// TestLeanBodyGrowsAsItArrives: a head alone must not cost its Content-Length in memory
// (net/http's body reader grows with the bytes that came): a few connections that send a
// head announcing a body at the limit, and no body, hold almost nothing.
func TestLeanBodyGrowsAsItArrives(t *testing.T) {
	const conns, limit = 16, 4 << 20
	f := &fakeGen{script: textScript("ok", "stop")}
	h := New(f, WithLogger(discardLogger()), WithContextLength(1024), WithMaxBodyBytes(limit))
	url, srv, wait := runServer(t, h, WithLeanGenerate())
	defer func() {
		require.NoError(t, srv.Shutdown(context.Background()))
		require.NoError(t, wait())
	}()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range conns {
		nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		require.NoError(t, err)
		defer nc.Close()
		_, err = fmt.Fprintf(nc, "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n{", limit)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { // every reader waits for the rest of its body
		srv.lean.mu.Lock()
		defer srv.lean.mu.Unlock()
		n := 0
		for c := range srv.lean.conns {
			if c.state.Load() == readBody {
				n++
			}
		}
		return n == conns
	}, time.Minute, time.Millisecond)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	require.Less(t, grew, int64(conns*limit/4), "heap grew %d bytes for %d heads announcing %d-byte bodies", grew, conns, limit)
}

// TestLeanSlicedRequests: heads and bodies that arrive in many small segments (a proxy
// that slices them) are read whole, bodies past the first buffer too, and the next
// request on the connection after them as well.
func TestLeanSlicedRequests(t *testing.T) {
	f := &fakeGen{script: textScript("ok", "stop")}
	addr, _ := startLean(t, f)
	big := strings.Repeat(" ", 3*minBodyBuf+17) + okBody
	for _, tc := range []struct {
		name string
		req  string
		size int // bytes per write
	}{
		{"byte by byte", genReq("s1", okBody), 1},
		{"big body", genReq("s2", big), 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
			br := bufio.NewReader(nc)
			for round := range 2 {
				for s := tc.req; s != ""; {
					n := min(tc.size, len(s))
					_, err := nc.Write([]byte(s[:n]))
					require.NoError(t, err)
					s = s[n:]
				}
				resp, err := http.ReadResponse(br, nil)
				require.NoError(t, err, "round %d", round)
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode, "round %d: %s", round, b)
				require.Contains(t, string(b), `"finish_reason":"stop"`, "round %d", round)
			}
		})
	}
}

// TestLeanCutRequestAnsweredAsNetHTTP: a client that half-closes the connection with a
// request unfinished (a head or a body short of its Content-Length) gets net/http's
// answer, a 400, from the lean server too, not a silent close. (Behind a whole request
// net/http's own answer varies with how the bytes arrive, so that case is not compared.)
func TestLeanCutRequestAnsweredAsNetHTTP(t *testing.T) {
	whole := genReq("r1", okBody)
	for _, tc := range []struct{ name, raw string }{
		{"short body", whole[:len(whole)-5]},
		{"cut head", "POST /generate HTTP/1.1\r\nHost: h\r\n"},
		{"head only", "POST /generate HTTP/1.1\r\nHost: h\r\nX-Request-Id: r2\r\nContent-Length: 10\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for i, lean := range []bool{false, true} {
				f := &fakeGen{script: textScript("x", "stop")}
				h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
				var opts []ServerOption
				if lean {
					opts = append(opts, WithLeanGenerate())
				}
				url, srv, wait := runServer(t, h, opts...)
				nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
				require.NoError(t, err)
				require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
				_, err = nc.Write([]byte(tc.raw))
				require.NoError(t, err)
				require.NoError(t, nc.(*net.TCPConn).CloseWrite())
				b, err := io.ReadAll(nc)
				require.NoError(t, err)
				got[i] = dateLine.ReplaceAllString(string(b), "\r\nDate: X\r\n")
				require.NoError(t, nc.Close())
				require.NoError(t, srv.Shutdown(context.Background()))
				require.NoError(t, wait())
				f.wg.Wait()
			}
			require.Equal(t, got[0], got[1], "net/http, then lean")
		})
	}
}

// TestLeanShutdownSparesNewConnection: a shutdown closes idle kept-alive connections at
// once but, like net/http (its issue 22682), not a connection accepted moments ago whose
// first request may be on its way: that request gets the draining server's 503, which a
// client may retry, rather than a close it cannot tell from a request lost.
func TestLeanShutdownSparesNewConnection(t *testing.T) {
	for _, tc := range []struct{ name, req string }{
		{"lean", genReq("f", okBody)},
		{"net/http", "GET /health HTTP/1.1\r\nHost: h\r\n\r\n"}, // handed over during the drain
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeGen{script: textScript("ok", "stop")}
			h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
			url, srv, wait := runServer(t, h, WithLeanGenerate(), WithShutdownGrace(time.Minute))
			addr := strings.TrimPrefix(url, "http://")
			dial := func() net.Conn {
				nc, err := net.Dial("tcp", addr)
				require.NoError(t, err)
				t.Cleanup(func() { nc.Close() })
				require.NoError(t, nc.SetDeadline(time.Now().Add(time.Minute))) // a hang guard
				return nc
			}
			used := dial() // idle after one answer
			_, err := used.Write([]byte(genReq("u", okBody)))
			require.NoError(t, err)
			_, body, err := http1.ReadResponse(used)
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, body)
			require.NoError(t, err)
			fresh := dial()
			require.Eventually(t, func() bool {
				srv.lean.mu.Lock()
				defer srv.lean.mu.Unlock()
				return len(srv.lean.conns) == 2
			}, time.Minute, time.Millisecond)

			done := make(chan error, 1)
			go func() { done <- srv.Shutdown(context.Background()) }()
			_, err = io.ReadAll(used) // the shutdown has swept the idle connections
			var ne net.Error
			require.False(t, errorAs(err, &ne) && ne.Timeout(), "the idle connection was not closed")

			_, err = fresh.Write([]byte(tc.req))
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(fresh), nil)
			require.NoError(t, err, "the new connection was closed")
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			require.True(t, resp.Close)
			require.NoError(t, <-done)
			require.NoError(t, wait())
		})
	}
}

// TestLeanEOFBehindRequestAborts: a peer that pipelined a head behind a request and went
// away before finishing it still aborts the request in hand (its EOF is not a half-close
// for net/http to answer while a request is in hand).
func TestLeanEOFBehindRequestAborts(t *testing.T) {
	f := &fakeGen{started: make(chan struct{}, 1), script: func(e *emitter) { e.hang() }}
	addr, h := startLean(t, f)
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write([]byte(genReq("a", okBody)))
	require.NoError(t, err)
	<-f.started
	_, err = nc.Write([]byte("POST /generate HTTP/1.1\r\nHost: h\r\n"))
	require.NoError(t, err)
	require.NoError(t, nc.(*net.TCPConn).CloseWrite())
	require.Eventually(t, func() bool { return f.abortCount() == 1 && h.InFlight() == 0 }, time.Minute, time.Millisecond,
		"the request in hand was not aborted")
}
