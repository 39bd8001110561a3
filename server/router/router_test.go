package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"pdsoak/server/gen"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeWorker is a hand-written prefill or decode worker on a real loopback socket.
type fakeWorker struct {
	srv      *httptest.Server
	boot     atomic.Value // string
	healthy  atomic.Bool
	calls    atomic.Int32
	canceled atomic.Int32 // /generate calls that saw their request context end
	mu       sync.Mutex
	reqs     []gen.WorkerRequest
	// generate serves /generate after the request was recorded.
	generate func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest)
}

func newFake(t *testing.T, boot string, generate func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest)) *fakeWorker {
	t.Helper()
	f := &fakeWorker{generate: generate}
	f.boot.Store(boot)
	f.healthy.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if !f.healthy.Load() {
			http.Error(w, `{"error":{"message":"stuck","type":"unavailable"}}`, http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/server_info", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"bootstrap_addr": f.boot.Load(), "role": "prefill"})
	})
	mux.HandleFunc("/generate", func(w http.ResponseWriter, r *http.Request) {
		var wr gen.WorkerRequest
		b, _ := io.ReadAll(r.Body) // to EOF, so the server notices a client that goes away
		if err := json.Unmarshal(b, &wr); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f.calls.Add(1)
		f.mu.Lock()
		f.reqs = append(f.reqs, wr)
		f.mu.Unlock()
		f.generate(w, r, wr)
		if r.Context().Err() != nil {
			f.canceled.Add(1)
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeWorker) requests() []gen.WorkerRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]gen.WorkerRequest(nil), f.reqs...)
}

func writeSSE(w http.ResponseWriter, chunks ...gen.WorkerChunk) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
}

// Worker behaviours.
func prefillOK(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
	writeSSE(w, gen.WorkerChunk{Done: true, Finish: "length", PromptTokens: len(wr.InputIDs)})
}

func decodeOK(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
	writeSSE(w, gen.WorkerChunk{TokenIDs: []int{7}}, gen.WorkerChunk{TokenIDs: []int{8, 9}},
		gen.WorkerChunk{Done: true, Finish: "stop", PromptTokens: len(wr.InputIDs), CompletionTokens: 3})
}

// blockUntilCancel holds the leg open until the router cancels it.
func blockUntilCancel(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

func refuse(status int, kind string) func(http.ResponseWriter, *http.Request, gen.WorkerRequest) {
	return func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"refused by fake","type":%q,"param":null,"code":null,"retry_after_seconds":2}}`, kind)
	}
}

func newRouter(t *testing.T, prefill, decode []*fakeWorker, opts ...Option) *Router {
	t.Helper()
	var ps, ds []Worker
	for _, f := range prefill {
		ps = append(ps, Worker{URL: f.srv.URL})
	}
	for _, f := range decode {
		ds = append(ds, Worker{URL: f.srv.URL})
	}
	r, err := New(ps, ds, append([]Option{WithSeed(1), WithHealthInterval(20 * time.Millisecond),
		WithHealthTimeout(time.Second), WithFailThreshold(1), WithLogger(nil)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(func() { r.Close() })
	return r
}

func req(id string) *gen.Request {
	return &gen.Request{ID: id, Prompt: []int{1, 2, 3}, MaxTokens: 3}
}

// collect reads a stream to its Done event, bounded in time.
func collect(t *testing.T, ch <-chan gen.Event) (tokens []int, final gen.Event) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("stream closed without a Done event")
			}
			tokens = append(tokens, ev.Tokens...)
			if ev.Done {
				if _, ok := <-ch; ok {
					t.Fatal("event after Done")
				}
				return tokens, ev
			}
		case <-deadline:
			t.Fatal("stream never finished")
		}
	}
}

func TestPairingAndRoom(t *testing.T) {
	p := newFake(t, "127.0.0.1:9001", prefillOK)
	d := newFake(t, "", decodeOK)
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
	ch, err := r.Generate(context.Background(), req("a"))
	if err != nil {
		t.Fatal(err)
	}
	tokens, final := collect(t, ch)
	if fmt.Sprint(tokens) != "[7 8 9]" || final.Err != nil || final.Finish != "stop" || final.CompletionTokens != 3 {
		t.Fatalf("tokens %v final %+v", tokens, final)
	}
	pr, dr := p.requests(), d.requests()
	if len(pr) != 1 || len(dr) != 1 {
		t.Fatalf("prefill got %d, decode got %d requests", len(pr), len(dr))
	}
	if pr[0].BootstrapRoom == nil || dr[0].BootstrapRoom == nil || *pr[0].BootstrapRoom != *dr[0].BootstrapRoom || *pr[0].BootstrapRoom>>63 != 0 {
		t.Fatalf("rooms %v %v", pr[0].BootstrapRoom, dr[0].BootstrapRoom)
	}
	if dr[0].BootstrapAddr != "127.0.0.1:9001" || dr[0].RID != "a" || dr[0].SamplingParams.MaxNewTokens != 3 {
		t.Fatalf("decode leg %+v", dr[0])
	}
	counts := map[string]float64{}
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				counts[mf.GetName()] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				counts[mf.GetName()] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	for name, want := range map[string]float64{"pdsoak_router_requests_total": 1, "pdsoak_router_time_to_first_token_seconds": 1,
		"pdsoak_router_e2e_request_latency_seconds": 1, "pdsoak_router_request_errors_total": 0} {
		if counts[name] != want {
			t.Errorf("%s = %v, want %v", name, counts[name], want)
		}
	}
}

func TestLeastOutstanding(t *testing.T) {
	release := make(chan struct{})
	hold := func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeSSE(w, gen.WorkerChunk{TokenIDs: []int{1}})
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		writeSSE(w, gen.WorkerChunk{Done: true, Finish: "length", CompletionTokens: 1})
	}
	p0, p1 := newFake(t, "127.0.0.1:1", prefillOK), newFake(t, "127.0.0.1:2", prefillOK)
	d0, d1 := newFake(t, "", hold), newFake(t, "", hold)
	r := newRouter(t, []*fakeWorker{p0, p1}, []*fakeWorker{d0, d1})
	ch1, err := r.Generate(context.Background(), req("first"))
	if err != nil {
		t.Fatal(err)
	}
	<-ch1 // first token: request one holds its decode worker
	ch2, err := r.Generate(context.Background(), req("second"))
	if err != nil {
		t.Fatal(err)
	}
	<-ch2
	if d0.calls.Load() != 1 || d1.calls.Load() != 1 {
		t.Fatalf("decode calls %d and %d, want one each", d0.calls.Load(), d1.calls.Load())
	}
	infos := r.Requests()
	if len(infos) != 2 || infos[0].Decode == infos[1].Decode || infos[0].Decode == "" || infos[0].Prefill == "" ||
		infos[0].Room == nil || infos[0].Stage != "streaming" {
		t.Fatalf("requests %+v", infos)
	}
	close(release)
	collect(t, ch1)
	collect(t, ch2)
	if n := len(r.Requests()); n != 0 {
		t.Fatalf("%d requests still listed", n)
	}
}

func TestPrefillFailureCancelsDecode(t *testing.T) {
	tests := []struct {
		name    string
		prefill func(http.ResponseWriter, *http.Request, gen.WorkerRequest)
		want    error
	}{
		{"error status", refuse(400, "context_length_exceeded"), gen.ErrContextLength},
		{"error in stream", func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
			writeSSE(w, gen.WorkerChunk{Done: true, Error: &gen.WorkerError{Kind: "timeout", Stage: "bootstrap", Message: "no decode"}})
		}, gen.ErrTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The prefill leg fails once the decode leg is in flight on the decode worker.
			decodeIn := make(chan struct{})
			p := newFake(t, "127.0.0.1:1", func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
				select {
				case <-decodeIn:
				case <-time.After(5 * time.Second):
				}
				tc.prefill(w, r, wr)
			})
			d := newFake(t, "", func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
				close(decodeIn)
				blockUntilCancel(w, r, wr)
			})
			r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
			ch, err := r.Generate(context.Background(), req("x"))
			if err != nil {
				t.Fatal(err)
			}
			_, final := collect(t, ch)
			if !errors.Is(final.Err, tc.want) {
				t.Fatalf("final error %v, want %v", final.Err, tc.want)
			}
			waitFor(t, "decode leg cancelled", func() bool { return d.canceled.Load() == 1 })
			if d.calls.Load() != 1 {
				t.Fatalf("decode called %d times (non-retryable error was retried)", d.calls.Load())
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestRetryOnlyBeforeOutput(t *testing.T) {
	t.Run("refused before output is retried on the other pair", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		dBad := newFake(t, "", refuse(503, "overloaded"))
		dGood := newFake(t, "", decodeOK)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{dBad, dGood})
		for i := 0; i < 4; i++ {
			ch, err := r.Generate(context.Background(), req(fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			tokens, final := collect(t, ch)
			if final.Err != nil || len(tokens) != 3 {
				t.Fatalf("request %d: %v %+v", i, tokens, final)
			}
		}
		if dGood.calls.Load() != 4 || dBad.calls.Load() == 0 {
			t.Fatalf("good decode %d calls, bad decode %d", dGood.calls.Load(), dBad.calls.Load())
		}
	})
	t.Run("broken after output is not retried", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		broken := func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
			writeSSE(w, gen.WorkerChunk{TokenIDs: []int{5}})
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		}
		d0, d1 := newFake(t, "", broken), newFake(t, "", broken)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d0, d1})
		ch, err := r.Generate(context.Background(), req("b"))
		if err != nil {
			t.Fatal(err)
		}
		tokens, final := collect(t, ch)
		if fmt.Sprint(tokens) != "[5]" || !errors.Is(final.Err, gen.ErrInternal) {
			t.Fatalf("tokens %v, final %v", tokens, final.Err)
		}
		if n := d0.calls.Load() + d1.calls.Load(); n != 1 {
			t.Fatalf("decode legs %d, want 1", n)
		}
	})
	t.Run("refusal kept when no other pair exists", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d := newFake(t, "", refuse(503, "overloaded"))
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
		ch, _ := r.Generate(context.Background(), req("o"))
		_, final := collect(t, ch)
		var oe *gen.OverloadError
		if !errors.As(final.Err, &oe) || oe.RetryAfter != 2*time.Second {
			t.Fatalf("final %v", final.Err)
		}
	})
	t.Run("not retryable", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d0, d1 := newFake(t, "", refuse(400, "invalid_request")), newFake(t, "", refuse(400, "invalid_request"))
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d0, d1})
		ch, _ := r.Generate(context.Background(), req("c"))
		if _, final := collect(t, ch); !errors.Is(final.Err, gen.ErrInvalid) {
			t.Fatalf("final %v", final.Err)
		}
		if n := d0.calls.Load() + d1.calls.Load(); n != 1 {
			t.Fatalf("decode legs %d, want 1", n)
		}
	})
}

func TestDisconnectAbortsBothLegs(t *testing.T) {
	prefillHold := func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) { blockUntilCancel(w, r, wr) }
	decodeHold := func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
		writeSSE(w, gen.WorkerChunk{TokenIDs: []int{4}})
		<-r.Context().Done()
	}
	p := newFake(t, "127.0.0.1:1", prefillHold)
	d := newFake(t, "", decodeHold)
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := r.Generate(ctx, req("gone"))
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; fmt.Sprint(ev.Tokens) != "[4]" {
		t.Fatalf("first event %+v", ev)
	}
	waitFor(t, "prefill leg started", func() bool { return p.calls.Load() == 1 })
	cancel()
	_, final := collect(t, ch)
	if !errors.Is(final.Err, gen.ErrAborted) {
		t.Fatalf("final %v", final.Err)
	}
	waitFor(t, "both legs cancelled", func() bool { return p.canceled.Load() == 1 && d.canceled.Load() == 1 })
}

func TestHealth(t *testing.T) {
	t.Run("unhealthy worker skipped", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d0, d1 := newFake(t, "", decodeOK), newFake(t, "", decodeOK)
		d0.healthy.Store(false)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d0, d1})
		for i := 0; i < 5; i++ {
			ch, err := r.Generate(context.Background(), req(fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			collect(t, ch)
		}
		if d0.calls.Load() != 0 || d1.calls.Load() != 5 {
			t.Fatalf("calls %d %d", d0.calls.Load(), d1.calls.Load())
		}
		d0.healthy.Store(true)
		waitFor(t, "decode-0 back", func() bool { return r.decode[0].healthy.Load() })
	})
	t.Run("no healthy pair", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d := newFake(t, "", decodeOK)
		d.healthy.Store(false)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
		if _, err := r.Generate(context.Background(), req("n")); !errors.Is(err, gen.ErrUnavailable) {
			t.Fatalf("Generate: %v", err)
		}
		if err := r.Healthy(); !errors.Is(err, gen.ErrUnavailable) || !strings.Contains(err.Error(), "decode-0 unhealthy") {
			t.Fatalf("Healthy: %v", err)
		}
	})
	t.Run("dead worker marked down by a request", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d0, d1 := newFake(t, "", decodeOK), newFake(t, "", decodeOK)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d0, d1}, WithHealthInterval(time.Hour))
		d0.srv.Close()
		for i := 0; i < 4; i++ {
			ch, err := r.Generate(context.Background(), req(fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			if _, final := collect(t, ch); final.Err != nil {
				t.Fatalf("request %d: %v", i, final.Err)
			}
		}
		if r.decode[0].healthy.Load() {
			t.Fatal("dead decode still healthy")
		}
	})
	t.Run("bootstrap address learned and overridden", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:7777", prefillOK)
		d := newFake(t, "", decodeOK)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d}, WithKVLink(p.srv.URL, d.srv.URL, "127.0.0.1:8888"))
		if got := r.prefill[0].bootstrap(); got != "127.0.0.1:7777" {
			t.Fatalf("learned %q", got)
		}
		ch, _ := r.Generate(context.Background(), req("k"))
		collect(t, ch)
		if got := d.requests()[0].BootstrapAddr; got != "127.0.0.1:8888" {
			t.Fatalf("decode dialled %q", got)
		}
		p.boot.Store("127.0.0.1:7778") // restarted on another bootstrap port
		waitFor(t, "new bootstrap address", func() bool { return r.prefill[0].bootstrap() == "127.0.0.1:7778" })
	})
}

func TestDeadline(t *testing.T) {
	p := newFake(t, "127.0.0.1:1", prefillOK)
	d := newFake(t, "", blockUntilCancel)
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d}, WithDeadlineGrace(10*time.Millisecond))
	rq := req("late")
	rq.Deadline = time.Now().Add(50 * time.Millisecond)
	ch, err := r.Generate(context.Background(), rq)
	if err != nil {
		t.Fatal(err)
	}
	if _, final := collect(t, ch); !errors.Is(final.Err, gen.ErrTimeout) {
		t.Fatalf("final %v", final.Err)
	}
	if got := d.requests()[0].DeadlineUnixMs; got != rq.Deadline.UnixMilli() {
		t.Fatalf("deadline sent %d", got)
	}
}

func TestStatusError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"overloaded body", 503, `{"error":{"message":"full","type":"overloaded","retry_after_seconds":3}}`, gen.ErrOverloaded},
		{"stage kept", 504, `{"error":{"message":"x","type":"timeout","stage":"prealloc"}}`, gen.ErrTimeout},
		{"plain 503", 503, "down", gen.ErrUnavailable},
		{"plain 429", 429, "", gen.ErrOverloaded},
		{"plain 404", 404, "nope", gen.ErrInvalid},
		{"plain 502", 502, "<html>", gen.ErrInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := statusError(tc.status, []byte(tc.body)); !errors.Is(err, tc.want) {
				t.Fatalf("got %v", err)
			}
		})
	}
	var se *gen.StageError
	if err := statusError(504, []byte(`{"error":{"message":"x","type":"timeout","stage":"prealloc"}}`)); !errors.As(err, &se) || se.Stage != "prealloc" {
		t.Fatalf("stage lost: %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	for name, c := range map[string][2][]Worker{
		"no prefill": {nil, {{URL: "http://a"}}},
		"no decode":  {{{URL: "http://a"}}, nil},
		"not a URL":  {{{URL: "a:1"}}, {{URL: "http://b"}}},
		"duplicate":  {{{URL: "http://a"}}, {{URL: "http://a/"}}},
	} {
		if _, err := New(c[0], c[1]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAbortOnUnhealthy(t *testing.T) {
	p := newFake(t, "127.0.0.1:1", prefillOK)
	d := newFake(t, "", func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
		writeSSE(w, gen.WorkerChunk{TokenIDs: []int{1}})
		<-r.Context().Done() // a frozen decode: the stream just stops
	})
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
	ch, err := r.Generate(context.Background(), req("frozen"))
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	d.healthy.Store(false)
	_, final := collect(t, ch)
	if !errors.Is(final.Err, gen.ErrUnavailable) || !strings.Contains(final.Err.Error(), "became unhealthy") {
		t.Fatalf("final %v", final.Err)
	}
	waitFor(t, "decode leg cancelled", func() bool { return d.canceled.Load() == 1 })
}

func TestRoomsDifferAcrossRuns(t *testing.T) {
	w := []Worker{{URL: "http://127.0.0.1:1", BootstrapAddr: "127.0.0.1:2"}}
	d := []Worker{{URL: "http://127.0.0.1:3"}}
	a, _ := New(w, d, WithSeed(1), WithRoomSalt(1))
	b, _ := New(w, d, WithSeed(1), WithRoomSalt(1))
	c, _ := New(w, d, WithSeed(1), WithRoomSalt(2))
	ra, rb, rc := a.room(), b.room(), c.room()
	if ra != rb || ra == rc || ra>>63 != 0 || rc>>63 != 0 {
		t.Fatalf("rooms %d %d %d", ra, rb, rc)
	}
}

// TestPrefillAfterKVIgnored: once decode streams tokens its KV has arrived, so a prefill
// leg that then fails or a prefill worker that goes unhealthy does not end the request.
func TestPrefillAfterKVIgnored(t *testing.T) {
	release := make(chan struct{})
	p := newFake(t, "127.0.0.1:1", func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		writeSSE(w, gen.WorkerChunk{Done: true, Error: &gen.WorkerError{Kind: "internal_error", Message: "late failure"}})
	})
	decodeGo := make(chan struct{})
	d := newFake(t, "", func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
		writeSSE(w, gen.WorkerChunk{TokenIDs: []int{1}})
		select {
		case <-decodeGo:
		case <-r.Context().Done():
			return
		}
		writeSSE(w, gen.WorkerChunk{TokenIDs: []int{2}}, gen.WorkerChunk{Done: true, Finish: "length", CompletionTokens: 2})
	})
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
	ch, err := r.Generate(context.Background(), req("late"))
	if err != nil {
		t.Fatal(err)
	}
	<-ch                   // first token
	p.healthy.Store(false) // prefill frozen: marked unhealthy
	waitFor(t, "prefill unhealthy", func() bool { return !r.prefill[0].healthy.Load() })
	close(release) // and its leg fails
	time.Sleep(50 * time.Millisecond)
	close(decodeGo)
	tokens, final := collect(t, ch)
	if final.Err != nil || fmt.Sprint(tokens) != "[2]" {
		t.Fatalf("tokens %v final %v", tokens, final.Err)
	}
}
