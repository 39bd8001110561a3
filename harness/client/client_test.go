package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a hand-written OpenAI-ish server whose handler is chosen per test. Handlers
// that hang wait on the request context or on stop, so Close never blocks.
type fake struct {
	srv   *httptest.Server
	stop  chan struct{}
	mu    sync.Mutex
	ids   []string
	close sync.Once
}

func newFake(t *testing.T, h func(f *fake, w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{stop: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.ids = append(f.ids, r.Header.Get("X-Request-ID"))
		f.mu.Unlock()
		h(f, w, r)
	}))
	t.Cleanup(func() {
		f.close.Do(func() { close(f.stop) })
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

// hang blocks until the client goes away or the test ends.
func (f *fake) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.stop:
	}
}

// sleep waits d, or less if the client goes away.
func (f *fake) sleep(r *http.Request, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	case <-f.stop:
		return false
	}
}

func sseHeaders(w http.ResponseWriter) http.Flusher {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	return fl
}

func chatChunk(content string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"content":%q},"finish_reason":%s}]}`+"\n\n", content, fr)
}

func writeTokens(w http.ResponseWriter, fl http.Flusher, n int) {
	for i := 0; i < n; i++ {
		fmt.Fprint(w, chatChunk(fmt.Sprintf("t%d ", i), ""))
		fl.Flush()
	}
}

func okStream(f *fake, w http.ResponseWriter, r *http.Request) {
	fl := sseHeaders(w)
	fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`+"\n\n")
	writeTokens(w, fl, 3)
	fmt.Fprint(w, chatChunk("", "stop"))
	fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}`+"\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// dl is for requests expected to end on their own: bounds a loaded machine keeps. A
// case whose point is a deadline sets that one tight (tight* below) and keeps the others
// generous, so that the bound it expects fires first even on a loaded machine.
var dl = Deadlines{Connect: 30 * time.Second, FirstToken: 30 * time.Second, Stall: 30 * time.Second, Total: time.Minute}

// with returns dl with the deadline named by fired set to d.
func with(fired string, d time.Duration) Deadlines {
	out := dl
	switch fired {
	case "connect":
		out.Connect = d
	case "first_token":
		out.FirstToken = d
	case "stall":
		out.Stall = d
	case "total":
		out.Total = d
	}
	return out
}

const (
	tightStall      = 450 * time.Millisecond
	tightFirstToken = 1200 * time.Millisecond
	tightTotal      = 3 * time.Second
)

func TestClassification(t *testing.T) {
	tests := []struct {
		name     string
		handler  func(f *fake, w http.ResponseWriter, r *http.Request)
		stream   bool
		endpoint string
		deadline Deadlines
		want     ledger.Outcome
		phase    ledger.Phase
		fired    string
	}{
		{name: "ok stream", stream: true, handler: okStream, want: ledger.OutcomeOK},
		{name: "finish_reason then EOF, no [DONE]", stream: true, want: ledger.OutcomeTruncated,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				writeTokens(w, fl, 2)
				fmt.Fprint(w, chatChunk("", "length"))
			}},
		{name: "ok non-stream", handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
		}, want: ledger.OutcomeOK},
		{name: "ok completions stream", stream: true, endpoint: EndpointCompletions, want: ledger.OutcomeOK,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/completions" {
					http.Error(w, "wrong path", 404)
					return
				}
				sseHeaders(w)
				fmt.Fprint(w, `data: {"choices":[{"text":"a","finish_reason":null}]}`+"\n\n")
				fmt.Fprint(w, `data: {"choices":[{"text":"b","finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
			}},
		{name: "never answers (stream)", stream: true, want: ledger.OutcomeDeadlineExceeded,
			phase: ledger.PhaseBeforeHeaders, fired: "first_token", deadline: with("first_token", tightFirstToken),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) { f.hang(r) }},
		{name: "never answers (non-stream)", want: ledger.OutcomeDeadlineExceeded,
			phase: ledger.PhaseBeforeHeaders, fired: "total", deadline: with("total", tightTotal),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) { f.hang(r) }},
		{name: "headers then nothing", stream: true, want: ledger.OutcomeStalled,
			phase: ledger.PhaseBeforeFirstToken, fired: "stall", deadline: with("stall", tightStall),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) { sseHeaders(w); f.hang(r) }},
		{name: "headers then nothing, no stall bound", stream: true, want: ledger.OutcomeDeadlineExceeded,
			phase: ledger.PhaseBeforeFirstToken, fired: "first_token",
			deadline: Deadlines{FirstToken: 400 * time.Millisecond, Total: time.Minute},
			handler:  func(f *fake, w http.ResponseWriter, r *http.Request) { sseHeaders(w); f.hang(r) }},
		{name: "stalls mid-stream", stream: true, want: ledger.OutcomeStalled,
			phase: ledger.PhaseMidStream, fired: "stall", deadline: with("stall", tightStall),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				writeTokens(w, fl, 2)
				f.hang(r)
			}},
		{name: "slow mid-stream hits total", stream: true, want: ledger.OutcomeDeadlineExceeded,
			phase: ledger.PhaseMidStream, fired: "total",
			deadline: with("total", 800*time.Millisecond),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				for i := 0; i < 100 && f.sleep(r, 100*time.Millisecond); i++ {
					writeTokens(w, fl, 1)
				}
			}},
		{name: "tokens keep a stream past its stall bound", stream: true, want: ledger.OutcomeOK,
			// Two seconds of tokens 50 ms apart under a 1 s stall bound: the stall timer,
			// re-armed by what is left rather than reset per chunk, must not fire.
			deadline: with("stall", time.Second),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				for i := 0; i < 40 && f.sleep(r, 50*time.Millisecond); i++ {
					writeTokens(w, fl, 1)
				}
				fmt.Fprint(w, chatChunk("", "stop")+"data: [DONE]\n\n")
			}},
		{name: "keep-alive comments forever", stream: true, want: ledger.OutcomeStalled,
			phase: ledger.PhaseBeforeFirstToken, fired: "stall", deadline: with("stall", tightStall),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				for i := 0; i < 100 && f.sleep(r, 40*time.Millisecond); i++ {
					fmt.Fprint(w, ": keep-alive\n\n")
					fl.Flush()
				}
			}},
		{name: "keep-alive comments mid-stream", stream: true, want: ledger.OutcomeStalled,
			phase: ledger.PhaseMidStream, fired: "stall", deadline: with("stall", tightStall),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				writeTokens(w, fl, 1)
				for i := 0; i < 100 && f.sleep(r, 40*time.Millisecond); i++ {
					fmt.Fprint(w, ":\n")
					fl.Flush()
				}
			}},
		{name: "closes without [DONE]", stream: true, want: ledger.OutcomeTruncated,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				writeTokens(w, fl, 2)
			}},
		{name: "reset mid-stream", stream: true, want: ledger.OutcomeConnectionLost,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				writeTokens(w, fl, 2)
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.(*net.TCPConn).SetLinger(0)
					conn.Close()
				}
			}},
		{name: "200 with invalid JSON", want: ledger.OutcomeInvalid,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"choices": [`+"\x00")
			}},
		{name: "200 without choices", want: ledger.OutcomeInvalid,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"id":"x"}`) }},
		{name: "invalid chunk in stream", stream: true, want: ledger.OutcomeInvalid,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				writeTokens(w, fl, 1)
				fmt.Fprint(w, "data: {not json\n\n")
			}},
		{name: "short non-stream body", want: ledger.OutcomeConnectionLost,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "500")
				fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"}`)
			}},
		{name: "non-stream without finish_reason", want: ledger.OutcomeTruncated,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"}}]}`)
			}},
		{name: "answers after the deadline", want: ledger.OutcomeDeadlineExceeded,
			phase: ledger.PhaseBeforeHeaders, fired: "total", deadline: with("total", tightTotal),
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				// Late by far more than a loaded machine delays the client's timer.
				f.sleep(r, tightTotal+30*time.Second)
				fmt.Fprint(w, `{"choices":[{"message":{"content":"late"},"finish_reason":"stop"}]}`)
			}},
		{name: "503", stream: true, want: ledger.OutcomeRejected,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(503)
				fmt.Fprint(w, `{"error":{"message":"overloaded","type":"overloaded"}}`)
			}},
		{name: "429", want: ledger.OutcomeRejected,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) { w.WriteHeader(429) }},
		{name: "500", stream: true, want: ledger.OutcomeHTTPError,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }},
		{name: "400", want: ledger.OutcomeHTTPError,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) { http.Error(w, "bad", 400) }},
		{name: "error event in stream", stream: true, want: ledger.OutcomeStreamError,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fl := sseHeaders(w)
				writeTokens(w, fl, 1)
				fmt.Fprint(w, `data: {"error":{"message":"kv transfer failed","type":"kv_transfer_failed"}}`+"\n\n")
			}},
		{name: "typed error event", stream: true, want: ledger.OutcomeStreamError,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				fmt.Fprint(w, "event: error\ndata: upstream died\n\n")
			}},
		{name: "200 with error body", want: ledger.OutcomeStreamError,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, `{"error":{"message":"nope"}}`)
			}},
		{name: "closed before headers", stream: true, want: ledger.OutcomeTransportError,
			handler: func(f *fake, w http.ResponseWriter, r *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.(*net.TCPConn).SetLinger(0)
					conn.Close()
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.handler)
			c, err := New(f.srv.URL)
			require.NoError(t, err)
			defer c.CloseIdleConnections()
			d := dl
			if tt.deadline != (Deadlines{}) {
				d = tt.deadline
			}
			req := &Request{ID: "req-" + strings.ReplaceAll(tt.name, " ", "-"), Endpoint: tt.endpoint, Model: "ref",
				Messages: []Message{{Role: "user", Content: "hello"}}, Prompt: "hello",
				MaxTokens: 4, Stream: tt.stream, Deadlines: d}
			start := time.Now()
			res := c.Do(context.Background(), req, nil)
			require.Equal(t, tt.want, res.Outcome, "err %q", res.Err)
			assert.Equal(t, tt.phase, res.Phase, "phase")
			assert.Equal(t, tt.fired, res.Deadline, "deadline that fired")
			// The request ends by its total deadline, not by the server: a bound only a
			// hang (waiting for the server's cleanup) breaks, never a loaded machine.
			assert.Less(t, time.Since(start), d.Total+c.inspectGrace+30*time.Second, "beyond the total deadline")
			if res.Outcome != ledger.OutcomeOK {
				assert.NotEmpty(t, res.Err, "non-ok outcome without an error text")
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			assert.Equal(t, []string{req.ID}, f.ids, "X-Request-ID the server saw")
		})
	}
}

func TestOKMetrics(t *testing.T) {
	f := newFake(t, okStream)
	c, _ := New(f.srv.URL)
	defer c.CloseIdleConnections()
	sched := time.Now().Add(-time.Second)
	obs := &recObs{}
	res := c.Do(context.Background(), &Request{ID: "m", Model: "ref", Stream: true, MaxTokens: 3,
		Messages: []Message{{Role: "user", Content: "x"}}, Scheduled: sched, Deadlines: dl}, obs)
	require.Equal(t, ledger.OutcomeOK, res.Outcome, res.Err)
	assert.Equal(t, "t0 t1 t2 ", res.Text)
	assert.Equal(t, 3, res.Chunks)
	assert.Len(t, res.ITL, 2)
	// Latencies count from the schedule, a second before the send.
	assert.GreaterOrEqual(t, res.TTFT(), time.Second, "ttft")
	assert.GreaterOrEqual(t, res.E2E(), res.TTFT(), "e2e")
	assert.GreaterOrEqual(t, res.Lag(), time.Second, "lag")
	assert.Equal(t, "stop", res.FinishReason)
	assert.Equal(t, 5, res.PromptTokens)
	assert.Equal(t, 3, res.CompletionTokens)
	assert.NotZero(t, res.Bytes)
	assert.Equal(t, []string{"sent", "headers:200", "first_token"}, obs.calls)
}

// The stream is read through views of the SSE reader's buffer (NextView): what the
// result keeps of an event (its finish_reason, its stream id, its text) must survive the
// events after it, which overwrite that buffer.
func TestResultKeepsNothingOfTheReadBuffer(t *testing.T) {
	f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request) {
		fl := sseHeaders(w)
		fmt.Fprint(w, `data: {"id":"stream-a","choices":[{"index":0,"delta":{"content":"x1"},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"stream-a","choices":[{"index":0,"delta":{"content":"y2"},"finish_reason":"eos_custom"}]}`+"\n\n")
		fl.Flush()
		// Events after it, in later reads, as long as it (padded with JSON whitespace):
		// they overwrite the buffers in place.
		ev2 := `{"id":"stream-a","choices":[{"index":0,"delta":{"content":"y2"},"finish_reason":"eos_custom"}]}`
		usage := `{"id":"stream-a","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`
		fmt.Fprint(w, "data: "+usage[:len(usage)-1]+strings.Repeat(" ", len(ev2)-len(usage))+"}\n\n")
		fmt.Fprint(w, ": "+strings.Repeat("z", 300)+"\n\n")
		fl.Flush()
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	c, _ := New(f.srv.URL)
	defer c.CloseIdleConnections()
	res := c.Do(context.Background(), &Request{ID: "v", Model: "ref", Stream: true, Deadlines: dl}, nil)
	require.Equal(t, ledger.OutcomeOK, res.Outcome, res.Err)
	assert.Equal(t, "eos_custom", res.FinishReason)
	assert.Equal(t, "x1y2", res.Text)
}

type recObs struct{ calls []string }

func (o *recObs) Sent(*Request, time.Time) { o.calls = append(o.calls, "sent") }
func (o *recObs) Headers(_ *Request, _ time.Time, s int) {
	o.calls = append(o.calls, fmt.Sprintf("headers:%d", s))
}
func (o *recObs) FirstToken(*Request, time.Time) { o.calls = append(o.calls, "first_token") }

func TestRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	c, _ := New("http://" + addr)
	res := c.Do(context.Background(), &Request{ID: "r", Model: "ref", Deadlines: dl}, nil)
	assert.Equal(t, ledger.OutcomeTransportError, res.Outcome, res.Err)
}

func TestConnectDeadline(t *testing.T) {
	tr := NewTransport(time.Minute)
	dialDone := make(chan struct{})
	release := make(chan struct{})
	defer func() { close(release); <-dialDone }()
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		// A dial that does not complete (full accept backlog, black hole) until the
		// test is over: net/http detaches dials from the request, so the test ends it.
		defer close(dialDone)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return nil, fmt.Errorf("dial timeout")
		}
	}
	c, _ := New("http://127.0.0.1:1", WithTransport(tr))
	res := c.Do(context.Background(), &Request{ID: "c", Model: "ref", Stream: true,
		Deadlines: with("connect", 100*time.Millisecond)}, nil)
	assert.Equal(t, ledger.OutcomeDeadlineExceeded, res.Outcome, res.Err)
	assert.Equal(t, ledger.PhaseConnect, res.Phase)
	assert.Equal(t, "connect", res.Deadline)
}

func TestCancelled(t *testing.T) {
	t.Run("harness cancels mid-stream", func(t *testing.T) {
		f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request) {
			fl := sseHeaders(w)
			writeTokens(w, fl, 1)
			f.hang(r)
		})
		c, _ := New(f.srv.URL)
		defer c.CloseIdleConnections()
		ctx, cancel := context.WithCancel(context.Background())
		obs := &cancelOnFirst{cancel: cancel}
		res := c.Do(ctx, &Request{ID: "x", Model: "ref", Stream: true, Deadlines: Deadlines{Total: 5 * time.Second}}, obs)
		assert.Equal(t, ledger.OutcomeCancelled, res.Outcome, res.Err)
		assert.Equal(t, ledger.PhaseMidStream, res.Phase)
	})
	t.Run("cancel after k tokens", func(t *testing.T) {
		f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request) {
			fl := sseHeaders(w)
			writeTokens(w, fl, 3)
			f.hang(r)
		})
		c, _ := New(f.srv.URL)
		defer c.CloseIdleConnections()
		res := c.Do(context.Background(), &Request{ID: "k", Model: "ref", Stream: true, CancelAfterTokens: 2,
			Deadlines: Deadlines{Total: 5 * time.Second}}, nil)
		assert.Equal(t, ledger.OutcomeCancelled, res.Outcome, res.Err)
		assert.Equal(t, 2, res.Chunks)
	})
	t.Run("the k-th token ends the stream", func(t *testing.T) {
		f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request) {
			fl := sseHeaders(w)
			writeTokens(w, fl, 1)
			fmt.Fprint(w, chatChunk("t1 ", "length"))
			fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`+"\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		})
		c, _ := New(f.srv.URL)
		defer c.CloseIdleConnections()
		res := c.Do(context.Background(), &Request{ID: "k", Model: "ref", Stream: true, CancelAfterTokens: 2,
			Deadlines: dl}, nil)
		assert.Equal(t, ledger.OutcomeOK, res.Outcome, res.Err)
		assert.Equal(t, 2, res.Chunks)
		assert.Equal(t, "length", res.FinishReason)
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c, _ := New("http://127.0.0.1:1")
		res := c.Do(ctx, &Request{ID: "z", Model: "ref", Deadlines: dl}, nil)
		assert.Equal(t, ledger.OutcomeCancelled, res.Outcome, res.Err)
	})
}

type cancelOnFirst struct{ cancel context.CancelFunc }

func (o *cancelOnFirst) Sent(*Request, time.Time)         {}
func (o *cancelOnFirst) Headers(*Request, time.Time, int) {}
func (o *cancelOnFirst) FirstToken(*Request, time.Time)   { o.cancel() }

func TestNewRejectsBadURL(t *testing.T) {
	_, err := New("127.0.0.1:80")
	assert.ErrorContains(t, err, "client: ")
}

// inspectObs checks the server still holds the request when BeforeDeadline runs.
type inspectObs struct {
	recObs
	held    func() bool
	mu      sync.Mutex
	calls   []string
	wasHeld bool
	during  func() // runs inside BeforeDeadline, as a slow inspection would
}

func (o *inspectObs) BeforeDeadline(req *Request, deadline string, phase ledger.Phase) {
	o.mu.Lock()
	o.calls = append(o.calls, deadline+":"+string(phase))
	o.wasHeld = o.held()
	o.mu.Unlock()
	if o.during != nil {
		o.during()
	}
}

func TestBeforeDeadlineRunsWhileServerHoldsRequest(t *testing.T) {
	var mu sync.Mutex
	open := false
	f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request) {
		fl := sseHeaders(w)
		writeTokens(w, fl, 1)
		mu.Lock()
		open = true
		mu.Unlock()
		f.hang(r)
		mu.Lock()
		open = false
		mu.Unlock()
	})
	c, _ := New(f.srv.URL)
	defer c.CloseIdleConnections()
	obs := &inspectObs{held: func() bool { mu.Lock(); defer mu.Unlock(); return open }}
	res := c.Do(context.Background(), &Request{ID: "i", Model: "ref", Stream: true, Deadlines: with("stall", tightStall)}, obs)
	assert.Equal(t, ledger.OutcomeStalled, res.Outcome, res.Err)
	assert.Equal(t, ledger.PhaseMidStream, res.Phase)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Equal(t, []string{"stall:mid_stream"}, obs.calls)
	assert.True(t, obs.wasHeld, "the server no longer held the request when BeforeDeadline ran")
}

// A reply that completes while the observer inspects the server is still late. Events,
// not sleeps, order it: the server answers once the inspection has begun (so past the
// stall bound), and the inspection ends only once the answer is on the wire.
func TestLateReplyDuringInspectionStaysLate(t *testing.T) {
	inspecting := make(chan struct{})
	replied := make(chan struct{})
	f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request) {
		defer close(replied)
		fl := sseHeaders(w)
		writeTokens(w, fl, 1)
		select {
		case <-inspecting:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, chatChunk("", "stop")+"data: [DONE]\n\n")
		fl.Flush()
	})
	c, _ := New(f.srv.URL)
	defer c.CloseIdleConnections()
	var once sync.Once
	obs := &inspectObs{held: func() bool { return true }, during: func() {
		once.Do(func() { close(inspecting) })
		<-replied
	}}
	res := c.Do(context.Background(), &Request{ID: "l", Model: "ref", Stream: true,
		Deadlines: with("stall", 300*time.Millisecond)}, obs)
	assert.Equal(t, ledger.OutcomeStalled, res.Outcome, res.Err)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Equal(t, []string{"stall:mid_stream"}, obs.calls)
}

// A finished stream's connection goes back to the pool: ten requests, one dial.
func TestConnectionReuse(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		okStream(nil, w, r)
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns[c.RemoteAddr().String()] = true
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	c, _ := New(srv.URL)
	defer c.CloseIdleConnections()
	for i := 0; i < 10; i++ {
		res := c.Do(context.Background(), &Request{ID: fmt.Sprint(i), Model: "ref", Stream: true, Deadlines: dl}, nil)
		require.Equal(t, ledger.OutcomeOK, res.Outcome, "request %d: %s", i, res.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, conns, 1, "connections for 10 sequential requests")
}
