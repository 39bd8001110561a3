package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"go.uber.org/goleak"

	"pdsoak/server/gen"
	"pdsoak/sse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeGen is a hand-written gen.Generator. Each request runs script in its own goroutine;
// the emitter honours cancellation the way the contract demands (a Done event with
// ErrAborted after ctx ends).
type fakeGen struct {
	refuse error
	script func(e *emitter)

	mu       sync.Mutex
	reqs     []gen.Request
	aborted  int
	wg       sync.WaitGroup
	started  chan struct{} // receives one value per started generation, if not nil
	healthy  error
	requests []gen.RequestInfo
}

type emitter struct {
	ctx context.Context
	req *gen.Request
	ch  chan gen.Event
	f   *fakeGen
}

// send delivers ev; when ctx ends first it sends the abort Done instead and reports false.
func (e *emitter) send(ev gen.Event) bool {
	select {
	case e.ch <- ev:
		return true
	case <-e.ctx.Done():
		e.abort()
		return false
	}
}

func (e *emitter) abort() {
	e.f.mu.Lock()
	e.f.aborted++
	e.f.mu.Unlock()
	select {
	case e.ch <- gen.Event{Done: true, Err: gen.ErrAborted}:
	case <-time.After(time.Minute): // a hang guard
	}
}

// text emits each byte of s as one token event, then Done with finish.
func (e *emitter) text(s, finish string) {
	for i := 0; i < len(s); i++ {
		if !e.send(gen.Event{Tokens: []int{int(s[i])}}) {
			return
		}
	}
	e.send(gen.Event{Done: true, Finish: finish, PromptTokens: len(e.req.Prompt), CompletionTokens: len(s)})
}

// await waits for release; false (after the abort) when the request was cancelled first.
func (e *emitter) await(release <-chan struct{}) bool {
	select {
	case <-release:
		return true
	case <-e.ctx.Done():
		e.abort()
		return false
	}
}

// hang blocks until the request is cancelled.
func (e *emitter) hang() {
	<-e.ctx.Done()
	e.abort()
}

func (f *fakeGen) Generate(ctx context.Context, req *gen.Request) (<-chan gen.Event, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, *req)
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != nil {
		return nil, refuse
	}
	ch := make(chan gen.Event)
	e := &emitter{ctx: ctx, req: req, ch: ch, f: f}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(ch)
		if f.started != nil {
			f.started <- struct{}{}
		}
		f.script(e)
	}()
	return ch, nil
}

func (f *fakeGen) Healthy() error                { f.mu.Lock(); defer f.mu.Unlock(); return f.healthy }
func (f *fakeGen) Requests() []gen.RequestInfo   { return f.requests }
func (f *fakeGen) set(fn func())                 { f.mu.Lock(); defer f.mu.Unlock(); fn() }
func (f *fakeGen) calls() int                    { f.mu.Lock(); defer f.mu.Unlock(); return len(f.reqs) }
func (f *fakeGen) last() gen.Request             { f.mu.Lock(); defer f.mu.Unlock(); return f.reqs[len(f.reqs)-1] }
func (f *fakeGen) abortCount() int               { f.mu.Lock(); defer f.mu.Unlock(); return f.aborted }
func textScript(s, finish string) func(*emitter) { return func(e *emitter) { e.text(s, finish) } }

// startServer serves h on a real loopback listener and cleans up after the test.
func startServer(t *testing.T, f *fakeGen, opts ...Option) (*httptest.Server, *Handler) {
	t.Helper()
	h := New(f, append([]Option{WithContextLength(1024), WithLogger(discardLogger())}, opts...)...)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		f.wg.Wait()
	})
	return srv, h
}

// response is what a test reads back.
type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url, body string, hdr map[string]string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func post(t *testing.T, url, body string) response { return do(t, http.MethodPost, url, body, nil) }

// errorOf decodes an OpenAI error body, failing the test when the shape is wrong.
func errorOf(t *testing.T, r response) ErrorDetail {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q, want application/json (body %s)", ct, r.body)
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, r.body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Fatalf("error body lacks error.%s: %s", k, r.body)
		}
	}
	var er ErrorResponse
	require.NoError(t, json.Unmarshal(r.body, &er))
	if er.Error.Message == "" || er.Error.Type == "" {
		t.Fatalf("empty message or type: %s", r.body)
	}
	return er.Error
}

// sseEvent is one "data:" payload of a stream.
type sseEvent = string

// readSSE splits a text/event-stream body into its data payloads, checking the framing.
func readSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	out, err := sse.ReadData(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("SSE stream: %v: %q", err, body)
	}
	// The writer's framing is exact: each event is one "data: " line and a blank line.
	var want strings.Builder
	for _, d := range out {
		want.WriteString("data: " + d + "\n\n")
	}
	if want.String() != string(body) {
		t.Fatalf("SSE framing is not one data line and a blank line per event: %q", body)
	}
	return out
}

var errBoom = errors.New("boom")
