package sim

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/client"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/scenarios"
	"pdsoak/server/api"
	"pdsoak/server/gen"
)

// script is a generation as a list of events (refuse: refused at Generate/Submit).
type script struct {
	refuse error
	events []gen.Event
}

func tokens(s string) gen.Event {
	ids := make([]int, len(s))
	for i := range s {
		ids[i] = int(s[i])
	}
	return gen.Event{Tokens: ids}
}

// scriptGen is a real gen.Generator playing a script (the real server side).
type scriptGen struct{ s script }

func (g scriptGen) Generate(ctx context.Context, req *gen.Request) (<-chan gen.Event, error) {
	if g.s.refuse != nil {
		return nil, g.s.refuse
	}
	ch := make(chan gen.Event)
	go func() {
		defer close(ch)
		for _, ev := range g.s.events {
			select {
			case ch <- ev:
			case <-ctx.Done():
				ch <- gen.Event{Done: true, Err: gen.ErrAborted}
				return
			}
		}
	}()
	return ch, nil
}

// scriptServer plays a script on the Loop (the simulated side), 1ms between events.
type scriptServer struct {
	loop *Loop
	s    script
}

func (s *scriptServer) Submit(req *gen.Request, emit func(gen.Event)) (func(), error) {
	if s.s.refuse != nil {
		return nil, s.s.refuse
	}
	stopped := false
	for i, ev := range s.s.events {
		s.loop.After(time.Duration(i+1)*time.Millisecond, func() {
			if !stopped {
				emit(ev)
			}
		})
	}
	return func() { stopped = true }, nil
}
func (s *scriptServer) Requests() map[string][]gen.RequestInfo { return nil }
func (s *scriptServer) Gauges() map[string]map[string]float64 {
	return map[string]map[string]float64{"prefill-0": {"sglang:num_running_reqs": 0}, "decode-0": {"sglang:num_running_reqs": 0}}
}
func (s *scriptServer) Fault(scenarios.Fault) (func(), error) { return func() {}, nil }
func (s *scriptServer) CanModel(scenarios.Fault) error        { return nil }

// TestClientAgreesWithTheRealOne plays one script through the real API and the real
// client over HTTP, and through the simulated front end and client, and requires the
// same classification: outcome, status, chunks, bytes, text, finish reason, usage.
func TestClientAgreesWithTheRealOne(t *testing.T) {
	done := func(finish string, completion int) gen.Event {
		return gen.Event{Done: true, Finish: finish, CompletionTokens: completion}
	}
	scripts := map[string]script{
		"ok":               {events: []gen.Event{tokens("he"), tokens("llo"), tokens(" wo"), done("length", 8)}},
		"ok, no finish":    {events: []gen.Event{tokens("abc"), {Tokens: []int{'d'}, Done: true}}},
		"utf-8 split":      {events: []gen.Event{{Tokens: []int{0xc3}}, {Tokens: []int{0xa9}}, tokens("!"), done("stop", 3)}},
		"overloaded":       {refuse: &gen.OverloadError{RetryAfter: 1200 * time.Millisecond, Reason: "queue full"}},
		"unavailable":      {refuse: gen.ErrUnavailable},
		"too long":         {refuse: gen.ErrContextLength},
		"error first":      {events: []gen.Event{{Done: true, Err: &gen.StageError{Stage: "transfer", Err: gen.ErrTransfer}}}},
		"error mid-stream": {events: []gen.Event{tokens("ab"), {Done: true, Err: &gen.StageError{Stage: "total", Err: gen.ErrTimeout}}}},
		"usage too small":  {events: []gen.Event{tokens("a"), tokens("b"), tokens("c"), {Done: true, Finish: "stop", CompletionTokens: 1}}},
	}
	for _, stream := range []bool{true, false} {
		for _, endpoint := range []string{"chat", "completions"} {
			for name, s := range scripts {
				t.Run(name+"/"+endpoint+"/stream="+map[bool]string{true: "yes", false: "no"}[stream], func(t *testing.T) {
					yaml := "name: agree\nduration: 1s\nreference: {prefill: 1, decode: 1}\nworkloads:\n  - {name: b, type: burst, count: 1, max_tokens: 8, temperature: 0.5, endpoint: " + endpoint + ", stream: " + map[bool]string{true: "true", false: "false"}[stream] + "}\nassertions: [no_silent_drops]\n"
					real, body := realResult(t, parse(t, yaml), s)
					simd := simResult(t, parse(t, yaml), s)
					assert.Equal(t, real.Outcome, simd.Outcome, "real: %s\nsim:  %s", real.Err, simd.Error)
					assert.Equal(t, real.Status, simd.Status)
					assert.Equal(t, real.Err, simd.Error)
					assert.Equal(t, real.Chunks, simd.Chunks)
					// The answers' "created" is the server's clock: Unix seconds of now, or of
					// the virtual epoch in a simulation (one digit fewer).
					virtual := created.ReplaceAll(body, []byte(`"created":946684800`))
					assert.Equal(t, real.Bytes, int64(len(body)))
					assert.Equal(t, int64(len(virtual)), simd.Bytes)
					assert.Equal(t, real.FinishReason, simd.FinishReason)
					assert.Equal(t, real.PromptTokens, simd.PromptTokens)
					assert.Equal(t, real.CompletionTokens, simd.CompletionTokens)
					assert.Equal(t, real.Phase, simd.Phase)
					assert.Equal(t, len(real.ITL), len(simd.ITL))
				})
			}
		}
	}
}

var created = regexp.MustCompile(`"created":[0-9]+`)

// recorder keeps a copy of what the handler writes.
type recorder struct {
	http.ResponseWriter
	body *bytes.Buffer
}

func (r recorder) Write(b []byte) (int, error) { r.body.Write(b); return r.ResponseWriter.Write(b) }
func (r recorder) Flush()                      { r.ResponseWriter.(http.Flusher).Flush() }

// realResult runs the request through the real API and client; it returns the result
// and the body the API wrote.
func realResult(t *testing.T, sc *scenarios.Scenario, s script) (*client.Result, []byte) {
	t.Helper()
	sc.ApplyDefaults()
	h := api.New(scriptGen{s}, api.WithModelName(sc.Target.Model), api.WithLogger(slog.New(slog.DiscardHandler)))
	var body bytes.Buffer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(recorder{w, &body}, r)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	require.NoError(t, err)
	defer c.CloseIdleConnections()
	w, err := workload.New(sc, 0)
	require.NoError(t, err)
	req := w.(*workload.Burst).Single(0, time.Now())
	res := c.Do(context.Background(), &req.Request, nil)
	srv.Close()
	return res, body.Bytes()
}

func simResult(t *testing.T, sc *scenarios.Scenario, s script) ledger.Event {
	t.Helper()
	evs, _, err := simulateWith(t, sc, func(l *Loop) Server { return &scriptServer{loop: l, s: s} })
	require.NoError(t, err)
	d := ofType(evs, ledger.EventDone)
	require.Len(t, d, 1)
	return d[0]
}
