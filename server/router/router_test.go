package router

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/internal/testutil"
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
	conns    map[string]bool // client addresses /generate came from
	// generate serves /generate after the request was recorded.
	generate func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest)
}

func newFake(t testing.TB, boot string, generate func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest)) *fakeWorker {
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
		if f.conns == nil {
			f.conns = map[string]bool{}
		}
		f.conns[r.RemoteAddr] = true
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

// generateConns is how many connections /generate requests came on.
func (f *fakeWorker) generateConns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
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
	case <-time.After(time.Minute): // a hang guard
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
		// The fakes answer health at once (a status, never a hang): a bound a loaded
		// machine keeps, so no healthy worker is ever marked down by a slow check.
		WithHealthTimeout(30 * time.Second), WithFailThreshold(1), WithLogger(nil)}, opts...)...)
	require.NoError(t, err)
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
	deadline := time.After(time.Minute) // a hang guard a loaded machine never reaches
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				require.Fail(t, "stream closed without a Done event")
			}
			tokens = append(tokens, ev.Tokens...)
			if ev.Done {
				if _, ok := <-ch; ok {
					require.Fail(t, "event after Done")
				}
				return tokens, ev
			}
		case <-deadline:
			require.Fail(t, "stream never finished")
		}
	}
}

func TestPairingAndRoom(t *testing.T) {
	p := newFake(t, "127.0.0.1:9001", prefillOK)
	d := newFake(t, "", decodeOK)
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
	ch, err := r.Generate(context.Background(), req("a"))
	require.NoError(t, err)
	tokens, final := collect(t, ch)
	require.NoError(t, final.Err)
	assert.Equal(t, []int{7, 8, 9}, tokens)
	assert.Equal(t, "stop", final.Finish)
	assert.Equal(t, 3, final.CompletionTokens)
	pr, dr := p.requests(), d.requests()
	require.Len(t, pr, 1, "prefill requests")
	require.Len(t, dr, 1, "decode requests")
	require.NotNil(t, pr[0].BootstrapRoom)
	require.NotNil(t, dr[0].BootstrapRoom)
	assert.Equal(t, *pr[0].BootstrapRoom, *dr[0].BootstrapRoom, "both legs share the room")
	assert.Zero(t, *pr[0].BootstrapRoom>>63, "room fits in 63 bits")
	assert.Equal(t, "127.0.0.1:9001", dr[0].BootstrapAddr)
	assert.Equal(t, "a", dr[0].RID)
	assert.Equal(t, 3, dr[0].SamplingParams.MaxNewTokens)
	counts := map[string]float64{}
	mfs, err := r.Gatherer().Gather()
	require.NoError(t, err)
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
		assert.Equal(t, want, counts[name], name)
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
	require.NoError(t, err)
	<-ch1 // first token: request one holds its decode worker
	ch2, err := r.Generate(context.Background(), req("second"))
	require.NoError(t, err)
	<-ch2
	assert.Equal(t, int32(1), d0.calls.Load(), "decode-0 calls")
	assert.Equal(t, int32(1), d1.calls.Load(), "decode-1 calls")
	infos := r.Requests()
	require.Len(t, infos, 2)
	assert.NotEqual(t, infos[0].Decode, infos[1].Decode)
	assert.NotEmpty(t, infos[0].Decode)
	assert.NotEmpty(t, infos[0].Prefill)
	assert.NotNil(t, infos[0].Room)
	assert.Equal(t, "streaming", infos[0].Stage)
	close(release)
	collect(t, ch1)
	collect(t, ch2)
	assert.Empty(t, r.Requests(), "requests still listed")
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
				case <-time.After(time.Minute): // a hang guard
				}
				tc.prefill(w, r, wr)
			})
			d := newFake(t, "", func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
				close(decodeIn)
				blockUntilCancel(w, r, wr)
			})
			r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
			ch, err := r.Generate(context.Background(), req("x"))
			require.NoError(t, err)
			_, final := collect(t, ch)
			require.ErrorIs(t, final.Err, tc.want)
			require.Eventually(t, func() bool { return d.canceled.Load() == 1 }, 30*time.Second, 10*time.Millisecond, "decode leg cancelled")
			assert.Equal(t, int32(1), d.calls.Load(), "a non-retryable error was retried")
		})
	}
}

func TestRetryOnlyBeforeOutput(t *testing.T) {
	t.Run("refused before output is retried on the other pair", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		dBad := newFake(t, "", refuse(503, "overloaded"))
		dGood := newFake(t, "", decodeOK)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{dBad, dGood})
		for i := 0; i < 4; i++ {
			ch, err := r.Generate(context.Background(), req(fmt.Sprint(i)))
			require.NoError(t, err)
			tokens, final := collect(t, ch)
			require.NoError(t, final.Err, "request %d", i)
			assert.Len(t, tokens, 3, "request %d", i)
		}
		assert.Equal(t, int32(4), dGood.calls.Load(), "good decode calls")
		assert.NotZero(t, dBad.calls.Load(), "bad decode calls")
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
		require.NoError(t, err)
		tokens, final := collect(t, ch)
		assert.Equal(t, []int{5}, tokens)
		require.ErrorIs(t, final.Err, gen.ErrInternal)
		assert.Equal(t, int32(1), d0.calls.Load()+d1.calls.Load(), "decode legs")
	})
	t.Run("refusal kept when no other pair exists", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d := newFake(t, "", refuse(503, "overloaded"))
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
		ch, _ := r.Generate(context.Background(), req("o"))
		_, final := collect(t, ch)
		var oe *gen.OverloadError
		require.ErrorAs(t, final.Err, &oe)
		assert.Equal(t, 2*time.Second, oe.RetryAfter)
	})
	t.Run("not retryable", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d0, d1 := newFake(t, "", refuse(400, "invalid_request")), newFake(t, "", refuse(400, "invalid_request"))
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d0, d1})
		ch, _ := r.Generate(context.Background(), req("c"))
		_, final := collect(t, ch)
		require.ErrorIs(t, final.Err, gen.ErrInvalid)
		assert.Equal(t, int32(1), d0.calls.Load()+d1.calls.Load(), "decode legs")
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
	require.NoError(t, err)
	ev := <-ch
	require.Equal(t, []int{4}, ev.Tokens, "first event")
	require.Eventually(t, func() bool { return p.calls.Load() == 1 }, 30*time.Second, 10*time.Millisecond, "prefill leg started")
	cancel()
	_, final := collect(t, ch)
	require.ErrorIs(t, final.Err, gen.ErrAborted)
	require.Eventually(t, func() bool { return p.canceled.Load() == 1 && d.canceled.Load() == 1 }, 30*time.Second, 10*time.Millisecond, "both legs cancelled")
}

func TestHealth(t *testing.T) {
	t.Run("unhealthy worker skipped", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d0, d1 := newFake(t, "", decodeOK), newFake(t, "", decodeOK)
		d0.healthy.Store(false)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d0, d1})
		for i := 0; i < 5; i++ {
			ch, err := r.Generate(context.Background(), req(fmt.Sprint(i)))
			require.NoError(t, err)
			collect(t, ch)
		}
		assert.Zero(t, d0.calls.Load(), "unhealthy decode calls")
		assert.Equal(t, int32(5), d1.calls.Load(), "healthy decode calls")
		d0.healthy.Store(true)
		require.Eventually(t, func() bool { return r.decode[0].healthy.Load() }, 30*time.Second, 10*time.Millisecond, "decode-0 back")
	})
	t.Run("no healthy pair", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d := newFake(t, "", decodeOK)
		d.healthy.Store(false)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
		_, err := r.Generate(context.Background(), req("n"))
		require.ErrorIs(t, err, gen.ErrUnavailable)
		err = r.Healthy()
		require.ErrorIs(t, err, gen.ErrUnavailable)
		assert.ErrorContains(t, err, "decode-0 unhealthy")
	})
	t.Run("dead worker marked down by a request", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:1", prefillOK)
		d0, d1 := newFake(t, "", decodeOK), newFake(t, "", decodeOK)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d0, d1}, WithHealthInterval(time.Hour))
		d0.srv.Close()
		for i := 0; i < 4; i++ {
			ch, err := r.Generate(context.Background(), req(fmt.Sprint(i)))
			require.NoError(t, err)
			_, final := collect(t, ch)
			require.NoError(t, final.Err, "request %d", i)
		}
		assert.False(t, r.decode[0].healthy.Load(), "dead decode still healthy")
	})
	t.Run("bootstrap address learned and overridden", func(t *testing.T) {
		p := newFake(t, "127.0.0.1:7777", prefillOK)
		d := newFake(t, "", decodeOK)
		r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d}, WithKVLink(p.srv.URL, d.srv.URL, "127.0.0.1:8888"))
		assert.Equal(t, "127.0.0.1:7777", r.prefill[0].bootstrap(), "learned address")
		ch, _ := r.Generate(context.Background(), req("k"))
		collect(t, ch)
		assert.Equal(t, "127.0.0.1:8888", d.requests()[0].BootstrapAddr, "address decode dialled")
		p.boot.Store("127.0.0.1:7778") // restarted on another bootstrap port
		require.Eventually(t, func() bool { return r.prefill[0].bootstrap() == "127.0.0.1:7778" }, 30*time.Second, 10*time.Millisecond, "new bootstrap address")
	})
}

func TestDeadline(t *testing.T) {
	p := newFake(t, "127.0.0.1:1", prefillOK)
	d := newFake(t, "", blockUntilCancel)
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d}, WithDeadlineGrace(10*time.Millisecond))
	rq := req("late")
	rq.Deadline = time.Now().Add(50 * time.Millisecond)
	ch, err := r.Generate(context.Background(), rq)
	require.NoError(t, err)
	_, final := collect(t, ch)
	require.ErrorIs(t, final.Err, gen.ErrTimeout)
	assert.Equal(t, rq.Deadline.UnixMilli(), d.requests()[0].DeadlineUnixMs, "deadline sent")
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
			assert.ErrorIs(t, statusError(tc.status, []byte(tc.body)), tc.want)
		})
	}
	var se *gen.StageError
	require.ErrorAs(t, statusError(504, []byte(`{"error":{"message":"x","type":"timeout","stage":"prealloc"}}`)), &se)
	assert.Equal(t, "prealloc", se.Stage, "stage kept")
}

func TestNewRejects(t *testing.T) {
	for name, c := range map[string][2][]Worker{
		"no prefill": {nil, {{URL: "http://a"}}},
		"no decode":  {{{URL: "http://a"}}, nil},
		"not a URL":  {{{URL: "a:1"}}, {{URL: "http://b"}}},
		"duplicate":  {{{URL: "http://a"}}, {{URL: "http://a/"}}},
	} {
		_, err := New(c[0], c[1])
		assert.ErrorContains(t, err, "router: ", name)
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
	require.NoError(t, err)
	<-ch
	d.healthy.Store(false)
	_, final := collect(t, ch)
	require.ErrorIs(t, final.Err, gen.ErrUnavailable)
	assert.ErrorContains(t, final.Err, "became unhealthy")
	require.Eventually(t, func() bool { return d.canceled.Load() == 1 }, 30*time.Second, 10*time.Millisecond, "decode leg cancelled")
}

func TestRoomsDifferAcrossRuns(t *testing.T) {
	w := []Worker{{URL: "http://127.0.0.1:1", BootstrapAddr: "127.0.0.1:2"}}
	d := []Worker{{URL: "http://127.0.0.1:3"}}
	a, _ := New(w, d, WithSeed(1), WithRoomSalt(1))
	b, _ := New(w, d, WithSeed(1), WithRoomSalt(1))
	c, _ := New(w, d, WithSeed(1), WithRoomSalt(2))
	room := func(r *Router) uint64 { // the first attempt's room, as a Flow draws it
		d := &flowDriver{Pool: r.core.Pool, r: r}
		d.f.Init(d, &r.core.Flow, req("x"), nil)
		return d.f.room()
	}
	ra, rb, rc := room(a), room(b), room(c)
	assert.Equal(t, ra, rb, "same seed and salt, same room")
	assert.NotEqual(t, ra, rc, "another salt, another room")
	assert.Zero(t, ra>>63)
	assert.Zero(t, rc>>63)
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
	logs := &testutil.SyncBuffer{}
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d}, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	ch, err := r.Generate(context.Background(), req("late"))
	require.NoError(t, err)
	<-ch                   // first token
	p.healthy.Store(false) // prefill frozen: marked unhealthy
	require.Eventually(t, func() bool { return !r.prefill[0].healthy.Load() }, 30*time.Second, 10*time.Millisecond, "prefill unhealthy")
	close(release) // and its leg fails: the router has seen it (and ignored it) before decode goes on
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "prefill leg failed after decode had its KV; ignored")
	}, 30*time.Second, 5*time.Millisecond, "router saw the prefill leg fail")
	close(decodeGo)
	tokens, final := collect(t, ch)
	require.NoError(t, final.Err)
	assert.Equal(t, []int{2}, tokens)
}

// TestFinalEventBeforePrefillLegEnds: the client gets its answer as soon as decode is
// done; the prefill leg is then left to end on its own, even though the client's side
// ends the request's context right away.
func TestFinalEventBeforePrefillLegEnds(t *testing.T) {
	release := make(chan struct{})
	prefillLate := func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
		select {
		case <-release:
		case <-time.After(time.Minute): // a hang guard
		}
		prefillOK(w, r, wr)
	}
	p := newFake(t, "127.0.0.1:9001", prefillLate)
	d := newFake(t, "", decodeOK)
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d}, WithPrefillGrace(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := r.Generate(ctx, req("early"))
	require.NoError(t, err)
	var tokens []int
	for done := false; !done; {
		select {
		case ev := <-ch:
			require.NoError(t, ev.Err)
			tokens, done = append(tokens, ev.Tokens...), ev.Done
		case <-time.After(30 * time.Second): // a hang guard
			require.Fail(t, "no final event while the prefill leg runs")
		}
	}
	require.Equal(t, []int{7, 8, 9}, tokens)
	require.Len(t, r.Requests(), 1, "the prefill leg is still running")
	cancel() // what the API handler does once it has written the answer
	close(release)
	_, open := <-ch
	require.False(t, open, "nothing after the final event")
	require.Eventually(t, func() bool { return len(r.Requests()) == 0 }, 30*time.Second, 5*time.Millisecond, "prefill leg ended")
	require.Equal(t, int32(1), p.calls.Load())
	require.Zero(t, p.canceled.Load(), "the prefill leg ended on its own, not cancelled")
}

// TestRequestLogLines: a request's lines carry its id, and those of an attempt its room
// and pair; below the logger's level nothing is formatted.
func TestRequestLogLines(t *testing.T) {
	tests := []struct {
		name  string
		level slog.Level
		want  []string
	}{
		{"info", slog.LevelInfo, []string{`msg="router: request routed" rid=logged room=`, `prefill=prefill-0 decode=decode-0`,
			`msg="router: request finished" rid=logged room=`}},
		{"warn", slog.LevelWarn, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs testutil.SyncBuffer
			p := newFake(t, "127.0.0.1:9001", prefillOK)
			d := newFake(t, "", decodeOK)
			r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d},
				WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: tc.level}))))
			ch, err := r.Generate(context.Background(), req("logged"))
			require.NoError(t, err)
			_, final := collect(t, ch)
			require.NoError(t, final.Err)
			out := logs.String()
			for _, w := range tc.want {
				require.Contains(t, out, w)
			}
			if tc.want == nil {
				require.NotContains(t, out, "rid=logged")
			}
		})
	}
}
