package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/internal/testutil"
	"pdsoak/kernels"
	"pdsoak/server/gen"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// bound guards against hangs; it is never an assertion about speed (a minute: a loaded
// machine keeps it).
const bound = time.Minute

func startEngine(t *testing.T, b kernels.Backend, cfg Config, opts ...Option) *Engine {
	t.Helper()
	e, err := New(b, cfg, append([]Option{WithLogger(quiet)}, opts...)...)
	require.NoError(t, err)
	e.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return e
}

func tinyref(t *testing.T, pages int) kernels.Backend {
	t.Helper()
	kc := kernels.DefaultConfig()
	kc.NumPages = pages
	b, err := kernels.New(kc)
	require.NoError(t, err)
	return b
}

func prompt(s string) []int {
	p := []int{kernels.TokenBOS}
	for _, c := range []byte(s) {
		p = append(p, int(c))
	}
	return p
}

type result struct {
	tokens []int
	done   gen.Event
	events int
}

// collect reads a stream to its Done event, checking the channel contract.
func collect(t *testing.T, ch <-chan gen.Event) result {
	t.Helper()
	var r result
	timeout := time.After(bound)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				if !r.done.Done {
					t.Fatal("channel closed without a Done event")
				}
				return r
			}
			if r.done.Done {
				t.Fatal("event after Done")
			}
			r.events++
			r.tokens = append(r.tokens, ev.Tokens...)
			if ev.Done {
				r.done = ev
			}
		case <-timeout:
			t.Fatal("stream did not finish")
		}
	}
}

func generate(t *testing.T, e *Engine, req *gen.Request) result {
	t.Helper()
	ch, err := e.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("generate %s: %v", req.ID, err)
	}
	return collect(t, ch)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, bound, 2*time.Millisecond, "waiting for %s", what)
}

func idle(e *Engine) bool {
	st := e.Stats()
	return e.live.Load() == 0 && st.Running == 0 && st.Queued == 0 && st.UsedPages == 0
}

func TestGreedyDeterminism(t *testing.T) {
	e := startEngine(t, tinyref(t, 256), DefaultConfig())
	req := func() *gen.Request {
		return &gen.Request{ID: "g", Prompt: prompt("The quick brown fox"), MaxTokens: 24, IgnoreEOS: true}
	}
	a, b := generate(t, e, req()), generate(t, e, req())
	if a.done.Err != nil || !slices.Equal(a.tokens, b.tokens) || len(a.tokens) != 24 {
		t.Fatalf("two greedy runs differ or failed:\n%v\n%v\nerr=%v", a.tokens, b.tokens, a.done.Err)
	}
	if a.done.Finish != "length" || a.done.CompletionTokens != 24 || a.done.PromptTokens != len(req().Prompt) {
		t.Fatalf("done event %+v", a.done)
	}
}

// TestBatchInvariance: 16 different prompts give the same tokens alone and together.
func TestBatchInvariance(t *testing.T) {
	e := startEngine(t, tinyref(t, 512), DefaultConfig())
	reqs := make([]*gen.Request, 16)
	for i := range reqs {
		reqs[i] = &gen.Request{ID: fmt.Sprint("b", i), Prompt: prompt(fmt.Sprintf("prompt number %d says", i*7)),
			MaxTokens: 12, IgnoreEOS: true, Sampling: kernels.Sampling{Temperature: float64(i%2) * 0.8, Seed: uint64(i)}}
	}
	alone := make([][]int, len(reqs))
	for i, r := range reqs {
		alone[i] = generate(t, e, r).tokens
	}
	together := make([][]int, len(reqs))
	var wg sync.WaitGroup
	chans := make([]<-chan gen.Event, len(reqs))
	for i, r := range reqs {
		ch, err := e.Generate(context.Background(), r)
		require.NoError(t, err)
		chans[i] = ch
	}
	for i := range reqs {
		wg.Add(1)
		go func() { defer wg.Done(); together[i] = collect(t, chans[i]).tokens }()
	}
	wg.Wait()
	for i := range reqs {
		if !slices.Equal(alone[i], together[i]) {
			t.Errorf("request %d: alone %v, in a batch %v", i, alone[i], together[i])
		}
	}
	waitFor(t, "idle", func() bool { return idle(e) })
}

// TestOverload: 50 concurrent requests against max-queued 4 / max-running 2 each
// complete or are refused with an OverloadError; nothing hangs; gauges return to 0.
func TestOverload(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxQueuedRequests, cfg.MaxRunningRequests = 4, 2
	e := startEngine(t, tinyref(t, 256), cfg)
	var mu sync.Mutex
	ok, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := e.Generate(context.Background(), &gen.Request{ID: fmt.Sprint("o", i), Prompt: prompt("overload me"), MaxTokens: 8, IgnoreEOS: true})
			if err != nil {
				var oe *gen.OverloadError
				if !errors.As(err, &oe) || oe.RetryAfter <= 0 {
					t.Errorf("request %d: refused with %v, want an OverloadError with Retry-After", i, err)
				}
				mu.Lock()
				refused++
				mu.Unlock()
				return
			}
			r := collect(t, ch)
			if r.done.Err != nil || len(r.tokens) != 8 {
				t.Errorf("request %d: %d tokens, err %v", i, len(r.tokens), r.done.Err)
			}
			mu.Lock()
			ok++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if ok+refused != 50 || ok == 0 || refused == 0 {
		t.Fatalf("ok=%d refused=%d", ok, refused)
	}
	waitFor(t, "gauges at 0", func() bool {
		return idle(e) && value(e.m.running) == 0 && value(e.m.queue) == 0 &&
			value(e.m.pagesUsed) == 0
	})
	if got := value(e.m.refused.WithLabelValues("overloaded")); int(got) != refused {
		t.Fatalf("refused counter %v, want %d", got, refused)
	}
	t.Logf("ok=%d refused=%d", ok, refused)
}

func TestAdmissionErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ContextLength = 32
	e := startEngine(t, newFakeBackend(64, 4), cfg)
	tests := []struct {
		name string
		req  *gen.Request
		want error
	}{
		{"empty prompt", &gen.Request{ID: "a", MaxTokens: 4}, gen.ErrInvalid},
		{"max tokens 0", &gen.Request{ID: "b", Prompt: []int{0, 5}, MaxTokens: 0}, gen.ErrInvalid},
		{"token outside vocab", &gen.Request{ID: "c", Prompt: []int{0, 5000}, MaxTokens: 2}, gen.ErrInvalid},
		{"over context", &gen.Request{ID: "d", Prompt: make([]int, 30), MaxTokens: 8}, gen.ErrContextLength},
		{"nil", nil, gen.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.Generate(context.Background(), tc.req); !errors.Is(err, tc.want) {
				t.Fatalf("err=%v want %v", err, tc.want)
			}
		})
	}
	if err := e.Healthy(); err != nil {
		t.Fatalf("unhealthy after bad input: %v", err)
	}
}

// TestAbortFreesPages: cancelling the context ends the stream with ErrAborted and
// returns every page.
func TestAbortFreesPages(t *testing.T) {
	fb := newFakeBackend(64, 4)
	fb.step = 2 * time.Millisecond
	e := startEngine(t, fb, DefaultConfig())
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Generate(ctx, &gen.Request{ID: "ab", Prompt: []int{0, 9, 9, 9, 9, 9}, MaxTokens: 200, IgnoreEOS: true})
	require.NoError(t, err)
	first := <-ch
	if len(first.Tokens) == 0 || first.Done {
		t.Fatalf("first event %+v", first)
	}
	waitFor(t, "pages in use", func() bool { return e.Stats().UsedPages > 0 })
	cancel()
	r := collect(t, ch)
	if !errors.Is(r.done.Err, gen.ErrAborted) {
		t.Fatalf("done err %v, want ErrAborted", r.done.Err)
	}
	waitFor(t, "pages freed", func() bool { return idle(e) })
	if got := value(e.m.aborts); got != 1 {
		t.Fatalf("abort counter %v", got)
	}
}

// TestSlowClient: a client that reads nothing until the end still gets every token in
// order (coalesced), and the engine never waits for it.
func TestSlowClient(t *testing.T) {
	e := startEngine(t, newFakeBackend(64, 4), DefaultConfig())
	req := &gen.Request{ID: "s", Prompt: []int{0, 3, 4}, MaxTokens: 100, IgnoreEOS: true}
	ch, err := e.Generate(context.Background(), req)
	require.NoError(t, err)
	waitFor(t, "request done", func() bool { return idle(e) })
	slow := collect(t, ch)
	fast := generate(t, e, req)
	if !slices.Equal(slow.tokens, fast.tokens) || len(slow.tokens) != 100 {
		t.Fatalf("slow client got %d tokens, fast %d; equal=%v\n%v\n%v", len(slow.tokens), len(fast.tokens), slices.Equal(slow.tokens, fast.tokens), slow.tokens, fast.tokens)
	}
	if slow.events > streamBuffer+1 {
		t.Fatalf("slow client got %d events; want coalescing into at most %d", slow.events, streamBuffer+1)
	}
}

// TestRetractionRecomputes: a pool too small for every running request forces
// retraction; outputs still match the requests run alone, and the retraction warning is
// written once per WithWarnEvery however often it happens.
func TestRetractionRecomputes(t *testing.T) {
	cfg := DefaultConfig()
	fb := newFakeBackend(10, 4)
	fb.step = time.Millisecond
	logs := &testutil.SyncBuffer{}
	e := startEngine(t, fb, cfg, WithLogger(slog.New(slog.NewTextHandler(logs, nil))), WithWarnEvery(time.Hour))
	reqs := make([]*gen.Request, 3)
	for i := range reqs {
		reqs[i] = &gen.Request{ID: fmt.Sprint("r", i), Prompt: []int{0, 10 + i, 11, 12, 13, 14}, MaxTokens: 10, IgnoreEOS: true}
	}
	alone := make([][]int, 3)
	for i, r := range reqs {
		alone[i] = generate(t, e, r).tokens
	}
	chans := make([]<-chan gen.Event, 3)
	for i, r := range reqs {
		ch, err := e.Generate(context.Background(), r)
		require.NoError(t, err)
		chans[i] = ch
	}
	for i := range chans {
		r := collect(t, chans[i])
		require.NoError(t, r.done.Err, "request %d", i)
		require.Equal(t, alone[i], r.tokens, "request %d", i)
	}
	require.NotZero(t, value(e.m.retractions), "expected retractions with 10 pages for 3 × 16 tokens")
	waitFor(t, "idle", func() bool { return idle(e) })
	assert.Equal(t, 1, strings.Count(logs.String(), "requests retracted"), "%v retractions", value(e.m.retractions))
}

// TestStageTimeouts runs the engine on a manual clock: a request stuck behind a running
// one expires with a waiting-stage timeout, and the total bound ends the running one.
func TestStageTimeouts(t *testing.T) {
	clk := newFakeClock()
	fb := newFakeBackend(300, 4)
	fb.step = time.Second // every step waits one second of the manual clock
	cfg := DefaultConfig()
	cfg.MaxRunningRequests = 1
	cfg.WaitingTimeout = 5 * time.Second
	cfg.RequestTimeout = 30 * time.Second
	cfg.WatchdogTimeout = -1
	e := startEngine(t, fb, cfg, WithClock(clk))
	a, err := e.Generate(context.Background(), &gen.Request{ID: "a", Prompt: []int{0, 5, 6}, MaxTokens: 1000, IgnoreEOS: true})
	require.NoError(t, err)
	b, err := e.Generate(context.Background(), &gen.Request{ID: "b", Prompt: []int{0, 7, 8}, MaxTokens: 4})
	require.NoError(t, err)
	// Both streams are read all along, so the engine never waits on a reader.
	var bDone, aDone gen.Event
	var aTokens int
	bFinished, aFinished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(bFinished)
		for ev := range b {
			if ev.Done {
				bDone = ev
			}
		}
	}()
	go func() {
		defer close(aFinished)
		for ev := range a {
			aTokens += len(ev.Tokens)
			if ev.Done {
				aDone = ev
			}
		}
	}()
	// The clock moves one second at a time, and only once the engine waits on it (it
	// asked for a new timer since the last move): fake time never runs ahead of a
	// loaded machine's engine, so the step counts below are exact, not races.
	seen := 0 // the engine's first waits (before the loop) count
	advanceUntil := func(done <-chan struct{}, maxSteps int) {
		t.Helper()
		for range maxSteps {
			select {
			case <-done:
				return
			default:
			}
			waitFor(t, "the engine to wait on the clock", func() bool { return clk.afterCalls() > seen })
			seen = clk.afterCalls()
			clk.Advance(time.Second)
		}
		select {
		case <-done:
		case <-time.After(bound):
			t.Fatalf("not done after %d seconds of fake time", maxSteps)
		}
	}
	advanceUntil(bFinished, 100)
	var se *gen.StageError
	if !errors.As(bDone.Err, &se) || se.Stage != "waiting" || !errors.Is(bDone.Err, gen.ErrTimeout) {
		t.Fatalf("b ended with %+v, want a waiting-stage timeout", bDone)
	}
	advanceUntil(aFinished, 200)
	if !errors.As(aDone.Err, &se) || se.Stage != "total" || aTokens == 0 {
		t.Fatalf("a ended with %+v after %d tokens, want a total-bound timeout", aDone, aTokens)
	}
	if got := value(e.m.timeouts.WithLabelValues("waiting")); got != 1 {
		t.Fatalf("waiting timeouts %v", got)
	}
	waitFor(t, "idle", func() bool { return idle(e) })
}

// TestShutdownErrorsInFlight: Shutdown with a short deadline fails every request in
// flight with ErrAborted, refuses new ones and leaves no goroutine behind.
func TestShutdownErrorsInFlight(t *testing.T) {
	fb := newFakeBackend(1100, 4)
	fb.step = time.Millisecond
	e, err := New(fb, DefaultConfig(), WithLogger(quiet))
	require.NoError(t, err)
	e.Start()
	var chans []<-chan gen.Event
	for i := range 6 {
		ch, err := e.Generate(context.Background(), &gen.Request{ID: fmt.Sprint("s", i), Prompt: []int{0, 4, 4}, MaxTokens: 4000, IgnoreEOS: true})
		require.NoError(t, err)
		chans = append(chans, ch)
	}
	<-chans[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown returned %v", err)
	}
	for i, ch := range chans {
		if r := collect(t, ch); !errors.Is(r.done.Err, gen.ErrAborted) {
			t.Fatalf("request %d ended with %+v", i, r.done)
		}
	}
	if _, err := e.Generate(context.Background(), &gen.Request{ID: "late", Prompt: []int{0, 1}, MaxTokens: 1}); !errors.Is(err, gen.ErrUnavailable) {
		t.Fatalf("generate after shutdown: %v", err)
	}
	if e.Healthy() == nil {
		t.Fatal("healthy after shutdown")
	}
}

// TestShutdownDrains: with time to spare, Shutdown lets requests finish normally.
func TestShutdownDrains(t *testing.T) {
	e, err := New(newFakeBackend(64, 4), DefaultConfig(), WithLogger(quiet))
	require.NoError(t, err)
	e.Start()
	ch, err := e.Generate(context.Background(), &gen.Request{ID: "d", Prompt: []int{0, 4}, MaxTokens: 50, IgnoreEOS: true})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx))
	if r := collect(t, ch); r.done.Err != nil || len(r.tokens) != 50 {
		t.Fatalf("drained request: %d tokens, %v", len(r.tokens), r.done.Err)
	}
}

func TestBackendErrorFailsBatch(t *testing.T) {
	fb := newFakeBackend(64, 4)
	e := startEngine(t, fb, DefaultConfig())
	fb.mu.Lock()
	fb.fail = errors.New("device lost")
	fb.mu.Unlock()
	r := generate(t, e, &gen.Request{ID: "x", Prompt: []int{0, 4}, MaxTokens: 5})
	if !errors.Is(r.done.Err, gen.ErrInternal) {
		t.Fatalf("got %+v", r.done)
	}
	if r := generate(t, e, &gen.Request{ID: "y", Prompt: []int{0, 4}, MaxTokens: 5, IgnoreEOS: true}); r.done.Err != nil {
		t.Fatalf("next request failed: %v", r.done.Err)
	}
}

func TestNewErrors(t *testing.T) {
	fb := newFakeBackend(16, 4)
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"page size mismatch", func(c *Config) { c.PageSize = 8 }},
		{"pool larger than store", func(c *Config) { c.MaxTotalTokens = 1000 }},
		{"pool of zero pages", func(c *Config) { c.MaxTotalTokens = 2 }},
		{"prefill without transfer", func(c *Config) { c.Role = RolePrefill }},
		{"bad semantics", func(c *Config) { c.Semantics = "loose" }},
		{"bad running", func(c *Config) { c.MaxRunningRequests = 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			if _, err := New(fb, cfg); err == nil {
				t.Fatal("want an error")
			}
		})
	}
	cfg := DefaultConfig()
	cfg.MaxTotalTokens = 40
	e, err := New(fb, cfg)
	if err != nil || e.Pages() != 10 {
		t.Fatalf("pages %v err %v", e.Pages(), err)
	}
}

// value reads a gauge or counter.
func value(m prometheus.Metric) float64 {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		panic(err)
	}
	switch {
	case pb.Gauge != nil:
		return pb.Gauge.GetValue()
	case pb.Counter != nil:
		return pb.Counter.GetValue()
	}
	return 0
}

// TestChunkedPrefillSameTokens: prefilling in chunks of 5 tokens gives the tokens of a
// whole-prompt prefill, alone and next to other requests.
func TestChunkedPrefillSameTokens(t *testing.T) {
	whole := startEngine(t, tinyref(t, 256), DefaultConfig())
	cfg := DefaultConfig()
	cfg.ChunkedPrefillSize, cfg.MaxPrefillTokens = 5, 12
	chunked := startEngine(t, tinyref(t, 256), cfg)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &gen.Request{ID: fmt.Sprint("c", i), Prompt: prompt(fmt.Sprintf("%d a prompt of some forty bytes or so, chunked", i)),
				MaxTokens: 10, IgnoreEOS: true, Sampling: kernels.Sampling{Temperature: float64(i%2) * 0.9, Seed: 3}}
			a, b := generate(t, whole, req), generate(t, chunked, req)
			if !slices.Equal(a.tokens, b.tokens) {
				t.Errorf("request %d: whole %v, chunked %v", i, a.tokens, b.tokens)
			}
		}()
	}
	wg.Wait()
}

// TestSimTimeAndPaced: backends with a modelled step time run through the engine (the
// loop waits out each step while still admitting), and the same seed gives the same
// tokens twice. Paced computes with tinyref, so it matches tinyref's tokens.
func TestSimTimeAndPaced(t *testing.T) {
	ref := startEngine(t, tinyref(t, 256), DefaultConfig())
	req := &gen.Request{ID: "st", Prompt: prompt("timed"), MaxTokens: 6, IgnoreEOS: true}
	want := generate(t, ref, req).tokens
	for _, name := range []string{kernels.BackendSimTime, kernels.BackendPaced} {
		t.Run(name, func(t *testing.T) {
			kc := kernels.DefaultConfig()
			kc.Backend, kc.NumPages, kc.Profile = name, 256, "tiny-cpu"
			b, err := kernels.New(kc)
			require.NoError(t, err)
			e := startEngine(t, b, DefaultConfig())
			a, c := generate(t, e, req), generate(t, e, req)
			if a.done.Err != nil || len(a.tokens) != 6 || !slices.Equal(a.tokens, c.tokens) {
				t.Fatalf("%v / %v (err %v)", a.tokens, c.tokens, a.done.Err)
			}
			if name == kernels.BackendPaced && !slices.Equal(a.tokens, want) {
				t.Fatalf("paced %v, tinyref %v", a.tokens, want)
			}
		})
	}
}

func TestShutdownBeforeStart(t *testing.T) {
	e, err := New(newFakeBackend(16, 4), DefaultConfig(), WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, e.Shutdown(context.Background()))
	e.Start() // no-op after Shutdown
	if _, err := e.Generate(context.Background(), &gen.Request{ID: "x", Prompt: []int{0}, MaxTokens: 1}); !errors.Is(err, gen.ErrUnavailable) {
		t.Fatalf("generate: %v", err)
	}
}
