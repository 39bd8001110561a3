package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/prometheus/client_golang/prometheus"

	"pdsoak/server/gen"
)

const chatBody = `{"model":"ref","messages":[{"role":"user","content":"hi"}],"temperature":0,"max_tokens":32}`
const complBody = `{"model":"ref","prompt":"hi","temperature":0,"max_tokens":32}`

func TestStatusMapping(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		status     int
		retryAfter string
		kind       string
		stage      string
	}{
		{"overload with hint", &gen.OverloadError{RetryAfter: 2500 * time.Millisecond, Reason: "queue full"}, 503, "3", "overloaded", ""},
		{"overload small hint", &gen.OverloadError{RetryAfter: time.Millisecond}, 503, "1", "overloaded", ""},
		{"overload no hint", fmt.Errorf("engine: full: %w", gen.ErrOverloaded), 503, "1", "overloaded", ""},
		{"invalid", fmt.Errorf("engine: bad: %w", gen.ErrInvalid), 400, "", "invalid_request", ""},
		{"context length", fmt.Errorf("engine: long: %w", gen.ErrContextLength), 400, "", "context_length_exceeded", ""},
		{"unavailable", fmt.Errorf("router: no pair: %w", gen.ErrUnavailable), 503, "", "unavailable", ""},
		{"timeout with stage", &gen.StageError{Stage: "prealloc", Err: gen.ErrTimeout}, 504, "", "timeout", "prealloc"},
		{"transfer", &gen.StageError{Stage: "transfer", Err: fmt.Errorf("crc: %w", gen.ErrTransfer)}, 502, "", "kv_transfer_failed", "transfer"},
		{"internal", gen.ErrInternal, 500, "", "internal_error", ""},
		{"unknown error", errBoom, 500, "", "internal_error", ""},
		{"server abort", gen.ErrAborted, 503, "", "aborted", ""},
	}
	for _, tc := range tests {
		for _, where := range []string{"refused", "first event"} {
			t.Run(tc.name+"/"+where, func(t *testing.T) {
				f := &fakeGen{}
				if where == "refused" {
					f.refuse = tc.err
				} else {
					f.script = func(e *emitter) { e.send(gen.Event{Done: true, Err: tc.err}) }
				}
				srv, _ := startServer(t, f)
				for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/generate"} {
					body := chatBody
					switch path {
					case "/v1/completions":
						body = strings.Replace(complBody, `"temperature":0`, `"temperature":0,"stream":true`, 1)
					case "/generate":
						body = `{"rid":"x","input_ids":[256,104,105],"sampling_params":{"max_new_tokens":4}}`
					}
					r := post(t, srv.URL+path, body)
					if r.status != tc.status {
						t.Fatalf("%s: status %d, want %d: %s", path, r.status, tc.status, r.body)
					}
					if got := r.header.Get("Retry-After"); got != tc.retryAfter {
						t.Errorf("%s: Retry-After %q, want %q", path, got, tc.retryAfter)
					}
					d := errorOf(t, r)
					if d.Type != tc.kind || d.Stage != tc.stage {
						t.Errorf("%s: type %q stage %q, want %q %q", path, d.Type, d.Stage, tc.kind, tc.stage)
					}
					// The router rebuilds the sentinel from a worker's refusal.
					if path == "/generate" && gen.ErrorKind(d.WorkerError().Err()) != tc.kind {
						t.Errorf("round trip of kind %q failed", tc.kind)
					}
				}
			})
		}
	}
}

func TestBadInput(t *testing.T) {
	big := `{"model":"ref","prompt":"` + strings.Repeat("a", 10<<20) + `"}`
	long := `{"model":"ref","prompt":"` + strings.Repeat("a", 1100) + `"}`
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		param  string
	}{
		{"malformed json", "POST", "/v1/chat/completions", `{"model":"ref","messages":[`, 400, ""},
		{"not an object", "POST", "/v1/completions", `[1,2]`, 400, ""},
		{"empty body", "POST", "/v1/completions", ``, 400, ""},
		{"max_tokens string", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":"ten"}`, 400, "max_tokens"},
		{"stream string", "POST", "/v1/completions", `{"prompt":"x","stream":"yes"}`, 400, "stream"},
		{"messages string", "POST", "/v1/chat/completions", `{"messages":"hello"}`, 400, "messages"},
		{"temperature string", "POST", "/v1/completions", `{"prompt":"x","temperature":"hot"}`, 400, "temperature"},
		{"content number", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content"},
		{"image part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages[0].content"},
		{"empty messages", "POST", "/v1/chat/completions", `{"model":"ref","messages":[]}`, 400, "messages"},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"ref"}`, 400, "messages"},
		{"blank content", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":""}]}`, 400, "messages"},
		{"bad role", "POST", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, 400, "messages[0].role"},
		{"empty prompt", "POST", "/v1/completions", `{"prompt":""}`, 400, "prompt"},
		{"no prompt", "POST", "/v1/completions", `{"model":"ref"}`, 400, "prompt"},
		{"batched prompt", "POST", "/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt"},
		{"negative token id", "POST", "/v1/completions", `{"prompt":[1,-2]}`, 400, "prompt"},
		{"max_tokens zero", "POST", "/v1/completions", `{"prompt":"x","max_tokens":0}`, 400, "max_tokens"},
		{"max_tokens negative", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":-5}`, 400, "max_tokens"},
		{"max_completion_tokens zero", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0}`, 400, "max_completion_tokens"},
		{"max_tokens absurd", "POST", "/v1/completions", `{"prompt":"x","max_tokens":1000000000}`, 400, "max_tokens"},
		{"max_tokens overflow", "POST", "/v1/completions", `{"prompt":"x","max_tokens":1e30}`, 400, "max_tokens"},
		{"prompt over context", "POST", "/v1/completions", long, 400, "prompt"},
		{"prompt plus max over context", "POST", "/v1/completions", `{"prompt":"` + strings.Repeat("a", 1000) + `","max_tokens":100}`, 400, "max_tokens"},
		{"invalid utf8", "POST", "/v1/completions", "{\"prompt\":\"\xff\xfe\"}", 400, ""},
		{"temperature high", "POST", "/v1/completions", `{"prompt":"x","temperature":3}`, 400, "temperature"},
		{"temperature negative", "POST", "/v1/completions", `{"prompt":"x","temperature":-1}`, 400, "temperature"},
		{"top_p high", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"top_p":1.5}`, 400, "top_p"},
		{"n two", "POST", "/v1/completions", `{"prompt":"x","n":2}`, 400, "n"},
		{"stop number", "POST", "/v1/completions", `{"prompt":"x","stop":7}`, 400, "stop"},
		{"stop empty string", "POST", "/v1/completions", `{"prompt":"x","stop":[""]}`, 400, "stop"},
		{"stream_options without stream", "POST", "/v1/completions", `{"prompt":"x","stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{"echo", "POST", "/v1/completions", `{"prompt":"x","echo":true}`, 400, "echo"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, 404, "model"},
		{"10 MB body", "POST", "/v1/completions", big, 413, ""},
		{"GET on completions", "GET", "/v1/completions", ``, 405, ""},
		{"POST on models", "POST", "/v1/models", `{}`, 405, ""},
		{"unknown path", "GET", "/v2/nothing", ``, 404, ""},
		{"worker empty ids", "POST", "/generate", `{"rid":"a","input_ids":[],"sampling_params":{"max_new_tokens":1}}`, 400, "input_ids"},
		{"worker id out of vocab", "POST", "/generate", `{"input_ids":[1,99999],"sampling_params":{"max_new_tokens":1}}`, 400, "input_ids"},
		{"worker no max", "POST", "/generate", `{"input_ids":[1]}`, 400, "sampling_params.max_new_tokens"},
		{"worker addr without room", "POST", "/generate", `{"input_ids":[1],"sampling_params":{"max_new_tokens":1},"bootstrap_addr":"127.0.0.1:1"}`, 400, "bootstrap_room"},
		{"worker ids wrong type", "POST", "/generate", `{"input_ids":"abc","sampling_params":{"max_new_tokens":1}}`, 400, "input_ids"},
	}
	f := &fakeGen{script: textScript("ok", "stop")}
	srv, _ := startServer(t, f, WithVocabSize(264))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, tc.method, srv.URL+tc.path, tc.body, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, tc.status, r.body)
			}
			d := errorOf(t, r)
			got := ""
			if d.Param != nil {
				got = *d.Param
			}
			if got != tc.param {
				t.Errorf("param %q, want %q (%s)", got, tc.param, d.Message)
			}
			if tc.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow header")
			}
		})
	}
	if n := f.calls(); n != 0 {
		t.Errorf("the generator was called %d times for bad input", n)
	}
	if r := do(t, "GET", srv.URL+"/health", "", nil); r.status != 200 {
		t.Fatalf("health after bad input: %d %s", r.status, r.body)
	}
}

func TestNonStream(t *testing.T) {
	f := &fakeGen{script: textScript("hello world", "length")}
	srv, _ := startServer(t, f)

	r := post(t, srv.URL+"/v1/chat/completions", chatBody)
	if r.status != 200 {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	var chat ChatResponse
	require.NoError(t, json.Unmarshal(r.body, &chat))
	if chat.Object != "chat.completion" || len(chat.Choices) != 1 || chat.Choices[0].Message == nil ||
		chat.Choices[0].Message.Content != "hello world" || chat.Choices[0].Message.Role != "assistant" ||
		*chat.Choices[0].FinishReason != "length" {
		t.Fatalf("chat response: %s", r.body)
	}
	if u := chat.Usage; u == nil || u.CompletionTokens != 11 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+11 {
		t.Fatalf("chat usage: %s", r.body)
	}
	req := f.last()
	if req.MaxTokens != 32 || req.Sampling.Temperature != 0 || req.Prompt[0] != 256 {
		t.Errorf("generator got %+v", req)
	}
	if want := "<|user|>\nhi\n<|assistant|>\n"; string(bytesOf(req.Prompt[1:])) != want {
		t.Errorf("chat template rendered %q, want %q", bytesOf(req.Prompt[1:]), want)
	}

	r = post(t, srv.URL+"/v1/completions", complBody)
	var cr CompletionResponse
	if err := json.Unmarshal(r.body, &cr); err != nil || r.status != 200 {
		t.Fatalf("completion: %d %s", r.status, r.body)
	}
	if cr.Object != "text_completion" || cr.Choices[0].Text != "hello world" || cr.Usage.CompletionTokens != 11 {
		t.Fatalf("completion response: %s", r.body)
	}
}

func bytesOf(ids []int) []byte {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return b
}

func TestStreamFraming(t *testing.T) {
	// "é" is two bytes: the decoder must never split it across chunks.
	f := &fakeGen{script: textScript("héllo", "stop")}
	srv, _ := startServer(t, f)
	tests := []struct {
		name string
		path string
		body string
	}{
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`},
		{"completion", "/v1/completions", `{"prompt":"x","stream":true,"stream_options":{"include_usage":true}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, srv.URL+tc.path, tc.body)
			if r.status != 200 || r.header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d type %q", r.status, r.header.Get("Content-Type"))
			}
			events := readSSE(t, r.body)
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %v", events)
			}
			var text strings.Builder
			var finish string
			var usage *Usage
			for i, ev := range events[:len(events)-1] {
				var c struct {
					Object  string `json:"object"`
					Choices []struct {
						Text  string `json:"text"`
						Delta struct {
							Role    string `json:"role"`
							Content string `json:"content"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
					Usage *Usage `json:"usage"`
				}
				if err := json.Unmarshal([]byte(ev), &c); err != nil {
					t.Fatalf("chunk %d: %v: %s", i, err, ev)
				}
				if c.Usage != nil {
					if len(c.Choices) != 0 || i != len(events)-2 {
						t.Fatalf("usage chunk must be last with no choices: %s", ev)
					}
					usage = c.Usage
					continue
				}
				if tc.name == "chat" && i == 0 && c.Choices[0].Delta.Role != "assistant" {
					t.Errorf("first chat chunk has no role: %s", ev)
				}
				text.WriteString(c.Choices[0].Text + c.Choices[0].Delta.Content)
				if strings.ContainsRune(c.Choices[0].Text+c.Choices[0].Delta.Content, '\uFFFD') {
					t.Errorf("a chunk split a character: %s", ev)
				}
				if c.Choices[0].FinishReason != nil {
					finish = *c.Choices[0].FinishReason
				}
			}
			if text.String() != "héllo" || finish != "stop" {
				t.Fatalf("text %q finish %q", text.String(), finish)
			}
			if usage == nil || usage.CompletionTokens != 6 {
				t.Fatalf("usage %+v", usage)
			}
		})
	}
}

func TestErrorAfterStart(t *testing.T) {
	f := &fakeGen{script: func(e *emitter) {
		for _, tok := range []int{'a', 'b', 'c'} {
			if !e.send(gen.Event{Tokens: []int{tok}}) {
				return
			}
		}
		e.send(gen.Event{Done: true, Err: &gen.StageError{Stage: "transfer", Err: gen.ErrTransfer}})
	}}
	srv, _ := startServer(t, f)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		t.Run(path, func(t *testing.T) {
			body := `{"messages":[{"role":"user","content":"x"}],"prompt":"x","stream":true}`
			r := post(t, srv.URL+path, body)
			if r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			events := readSSE(t, r.body)
			last := events[len(events)-1]
			if last == "[DONE]" || strings.Contains(string(r.body), "[DONE]") {
				t.Fatalf("failed stream must not carry [DONE]: %v", events)
			}
			var er ErrorResponse
			if err := json.Unmarshal([]byte(last), &er); err != nil || er.Error.Type != "kv_transfer_failed" || er.Error.Stage != "transfer" {
				t.Fatalf("last event is not the error: %s", last)
			}
			if strings.Contains(string(r.body), `"finish_reason":"`) {
				t.Fatalf("failed stream carries a finish reason: %s", r.body)
			}
		})
	}
	t.Run("non-stream", func(t *testing.T) {
		r := post(t, srv.URL+"/v1/completions", complBody)
		if r.status != 502 || errorOf(t, r).Type != "kv_transfer_failed" {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	})
	t.Run("worker", func(t *testing.T) {
		r := post(t, srv.URL+"/generate", `{"input_ids":[256,1],"sampling_params":{"max_new_tokens":8}}`)
		events := readSSE(t, r.body)
		var c gen.WorkerChunk
		require.NoError(t, json.Unmarshal([]byte(events[len(events)-1]), &c))
		if !c.Done || c.Error == nil || c.Error.Kind != "kv_transfer_failed" || c.Error.Stage != "transfer" || c.Finish != "" {
			t.Fatalf("final worker chunk %+v", c)
		}
	})
}

func TestStopStrings(t *testing.T) {
	tests := []struct {
		name  string
		out   string
		stop  string
		want  string
		match bool
	}{
		{"single", "hello world", `"wor"`, "hello ", true},
		{"list earliest wins", "hello world", `["orl","llo"]`, "he", true},
		{"at start", "hello", `"he"`, "", true},
		{"no match keeps held tail", "hello wo", `"wor"`, "hello wo", false},
		{"multibyte", "añb", `"ñ"`, "a", true},
		{"null", "abc", `null`, "abc", false},
	}
	for _, tc := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				f := &fakeGen{script: textScript(tc.out, "length")}
				srv, _ := startServer(t, f)
				body := fmt.Sprintf(`{"prompt":"x","max_tokens":50,"stop":%s,"stream":%v}`, tc.stop, stream)
				r := post(t, srv.URL+"/v1/completions", body)
				if r.status != 200 {
					t.Fatalf("status %d %s", r.status, r.body)
				}
				var text, finish string
				chunks := []string{string(r.body)}
				if stream {
					chunks = readSSE(t, r.body)
					if chunks[len(chunks)-1] != "[DONE]" {
						t.Fatalf("no [DONE]: %v", chunks)
					}
					chunks = chunks[:len(chunks)-1]
				}
				for _, c := range chunks {
					var cr CompletionResponse
					require.NoError(t, json.Unmarshal([]byte(c), &cr))
					text += cr.Choices[0].Text
					if cr.Choices[0].FinishReason != nil {
						finish = *cr.Choices[0].FinishReason
					}
				}
				wantFinish := "length"
				if tc.match {
					wantFinish = "stop"
				}
				if text != tc.want || finish != wantFinish {
					t.Fatalf("text %q finish %q, want %q %q", text, finish, tc.want, wantFinish)
				}
				f.wg.Wait()
				if tc.match && f.abortCount() != 1 {
					t.Errorf("a matched stop string must cancel the generation (aborts %d)", f.abortCount())
				}
			})
		}
	}
}

func TestStopMatcherChunking(t *testing.T) {
	// Any split of the output gives the same released text.
	out, stops := "the cat sat on the mat", []string{"on t", "xyz", "sat on"}
	for size := 1; size <= len(out); size++ {
		m := &stopMatcher{stops: stops}
		var got string
		for i := 0; i < len(out); i += size {
			s, matched := m.push(out[i:min(i+size, len(out))])
			got += s
			if matched {
				break
			}
		}
		if got != "the cat " {
			t.Fatalf("chunk size %d: %q", size, got)
		}
	}
}

func TestRequestID(t *testing.T) {
	f := &fakeGen{script: textScript("x", "stop")}
	srv, _ := startServer(t, f)
	tests := []struct {
		name string
		sent string
		keep bool
	}{
		{"honoured", "req-123_abc", true},
		{"absent", "", false},
		{"with space", "a b", false},
		{"too long", strings.Repeat("x", 200), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.sent != "" {
				hdr["X-Request-ID"] = tc.sent
			}
			for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
				r := do(t, "POST", srv.URL+path, chatBody, hdr)
				got := r.header.Get("X-Request-ID")
				if got == "" || (tc.keep && got != tc.sent) || (!tc.keep && got == tc.sent) {
					t.Fatalf("X-Request-ID %q for sent %q", got, tc.sent)
				}
				if r.status == 200 && f.last().ID != got {
					t.Errorf("generator saw id %q, response says %q", f.last().ID, got)
				}
			}
			// Errors carry it too.
			r := do(t, "POST", srv.URL+"/v1/completions", `{`, hdr)
			if r.header.Get("X-Request-ID") == "" {
				t.Fatal("error response without X-Request-ID")
			}
		})
	}
	t.Run("worker rid wins", func(t *testing.T) {
		r := post(t, srv.URL+"/generate", `{"rid":"router-7","input_ids":[256,1],"sampling_params":{"max_new_tokens":2}}`)
		if r.header.Get("X-Request-ID") != "router-7" || f.last().ID != "router-7" {
			t.Fatalf("worker rid: header %q generator %q", r.header.Get("X-Request-ID"), f.last().ID)
		}
	})
}

func TestClientDisconnectCancels(t *testing.T) {
	f := &fakeGen{started: make(chan struct{}, 4), script: func(e *emitter) {
		if e.send(gen.Event{Tokens: []int{'a'}}) {
			e.hang()
		}
	}}
	srv, h := startServer(t, f)
	for _, tc := range []struct{ name, path, body string }{
		{"stream", "/v1/completions", `{"prompt":"x","stream":true}`},
		{"non-stream", "/v1/chat/completions", chatBody},
		{"worker", "/generate", `{"input_ids":[256,1],"sampling_params":{"max_new_tokens":2}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.abortCount()
			ctx, cancel := contextWithTimeout(time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+tc.path, strings.NewReader(tc.body))
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					buf := make([]byte, 1)
					_, err = resp.Body.Read(buf)
					for err == nil {
						_, err = resp.Body.Read(buf)
					}
					resp.Body.Close()
				}
				errc <- err
			}()
			<-f.started
			cancel()
			<-errc
			deadline := time.After(time.Minute) // a hang guard
			for f.abortCount() == before || h.InFlight() != 0 {
				select {
				case <-deadline:
					t.Fatalf("generation not cancelled after the client left (aborts %d, in flight %d)", f.abortCount(), h.InFlight())
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
}

func TestOperationalEndpoints(t *testing.T) {
	room := uint64(7)
	f := &fakeGen{script: textScript("x", "stop"),
		requests: []gen.RequestInfo{{ID: "young", Stage: "running", AgeSeconds: 1}, {ID: "old", Stage: "prealloc", AgeSeconds: 9, Room: &room}}}
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sglang:num_running_reqs"})
	reg.MustRegister(g)
	g.Set(3)
	srv, _ := startServer(t, f, WithGatherer(reg), WithRole("decode"),
		WithServerInfo(map[string]any{"semantics": "strict", "page_size": 16}))

	r := do(t, "GET", srv.URL+"/health", "", nil)
	if r.status != 200 {
		t.Fatalf("health: %d %s", r.status, r.body)
	}
	f.set(func() { f.healthy = fmt.Errorf("engine: watchdog: no progress for 30s with 4 queued") })
	r = do(t, "GET", srv.URL+"/health", "", nil)
	if r.status != 503 || !strings.Contains(errorOf(t, r).Message, "no progress") {
		t.Fatalf("unhealthy: %d %s", r.status, r.body)
	}
	f.set(func() { f.healthy = nil })

	r = do(t, "GET", srv.URL+"/debug/requests", "", nil)
	var dr DebugRequests
	if err := json.Unmarshal(r.body, &dr); err != nil || dr.Role != "decode" || dr.Count != 2 || dr.Requests[0].ID != "old" || *dr.Requests[0].Room != 7 {
		t.Fatalf("debug/requests: %s", r.body)
	}
	r = do(t, "GET", srv.URL+"/server_info", "", nil)
	var info map[string]any
	if err := json.Unmarshal(r.body, &info); err != nil || info["role"] != "decode" || info["semantics"] != "strict" || info["model"] != "ref" {
		t.Fatalf("server_info: %s", r.body)
	}
	r = do(t, "GET", srv.URL+"/v1/models", "", nil)
	if !strings.Contains(string(r.body), `"id":"ref"`) || !strings.Contains(string(r.body), `"max_model_len":1024`) {
		t.Fatalf("models: %s", r.body)
	}
	r = do(t, "GET", srv.URL+"/metrics", "", nil)
	if !strings.Contains(string(r.body), "sglang:num_running_reqs 3") {
		t.Fatalf("metrics: %s", r.body)
	}
	r = do(t, "GET", srv.URL+"/debug/pprof/", "", nil)
	if r.status != 200 || !strings.Contains(string(r.body), "goroutine") {
		t.Fatalf("pprof: %d", r.status)
	}
	r = do(t, "GET", srv.URL+"/debug/pprof/goroutine?debug=1", "", nil)
	if r.status != 200 {
		t.Fatalf("pprof goroutine: %d", r.status)
	}
	if r = do(t, "GET", srv.URL+"/admin/failpoints", "", nil); r.status != 404 {
		t.Fatalf("admin without handler: %d", r.status)
	}
}

func TestAdminLoopbackOnly(t *testing.T) {
	admin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := New(&fakeGen{}, WithAdminHandler(admin), WithLogger(discardLogger()))
	for _, tc := range []struct {
		remote string
		status int
	}{{"127.0.0.1:5000", http.StatusTeapot}, {"[::1]:5000", http.StatusTeapot}, {"10.1.2.3:5000", http.StatusForbidden}} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/admin/failpoints", nil)
		req.RemoteAddr = tc.remote
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s: %d, want %d", tc.remote, rec.Code, tc.status)
		}
	}
}

func TestWorkerGenerate(t *testing.T) {
	f := &fakeGen{script: textScript("hey", "stop")}
	srv, _ := startServer(t, f)
	deadline := time.Now().Add(time.Minute).UnixMilli()
	body := fmt.Sprintf(`{"rid":"r1","input_ids":[256,104,105],"sampling_params":{"max_new_tokens":5,"temperature":0.5,"top_p":0.9,"seed":42},"bootstrap_room":99,"bootstrap_addr":"127.0.0.1:8998","deadline_unix_ms":%d}`, deadline)
	r := post(t, srv.URL+"/generate", body)
	if r.status != 200 || r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var toks []int
	var final gen.WorkerChunk
	for _, ev := range readSSE(t, r.body) {
		var c gen.WorkerChunk
		require.NoError(t, json.Unmarshal([]byte(ev), &c))
		toks = append(toks, c.TokenIDs...)
		final = c
	}
	if string(bytesOf(toks)) != "hey" || !final.Done || final.Finish != "stop" || final.CompletionTokens != 3 || final.PromptTokens != 3 {
		t.Fatalf("tokens %v final %+v", toks, final)
	}
	req := f.last()
	if req.ID != "r1" || req.Bootstrap == nil || req.Bootstrap.Room != 99 || req.Bootstrap.Addr != "127.0.0.1:8998" ||
		req.Deadline.UnixMilli() != deadline || req.Sampling.Seed != 42 || req.Sampling.TopP != 0.9 || req.MaxTokens != 5 {
		t.Fatalf("generator got %+v", req)
	}
}

func TestDrainingRefuses(t *testing.T) {
	f := &fakeGen{script: textScript("x", "stop")}
	srv, h := startServer(t, f)
	h.Drain()
	r := post(t, srv.URL+"/v1/chat/completions", chatBody)
	if r.status != 503 || errorOf(t, r).Type != "unavailable" {
		t.Fatalf("draining: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", srv.URL+"/health", "", nil); r.status != 503 {
		t.Fatalf("health while draining: %d", r.status)
	}
}

func TestUnknownFieldsTolerated(t *testing.T) {
	f := &fakeGen{script: textScript("ok", "stop")}
	srv, _ := startServer(t, f)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x","tool_call_id":"a"}],"tools":[],"logprobs":false,"user":"u","frequency_penalty":0.5,"response_format":{"type":"text"}}`},
		{"/v1/completions", `{"prompt":"x","logprobs":null,"best_of":1,"suffix":null,"presence_penalty":0,"something_new":{"a":[1]}}`},
	} {
		if r := post(t, srv.URL+tc.path, tc.body); r.status != 200 {
			t.Errorf("%s: %d %s", tc.path, r.status, r.body)
		}
	}
}

// TestRouterReadinessAndLiveness: the router answers the real SGLang router's probe
// names, /readiness as truthfully as /health (a pack waits on it for the router to have
// workers) and /liveness 200 whatever its workers' state; a worker has neither, as
// SGLang's workers do not.
func TestRouterReadinessAndLiveness(t *testing.T) {
	f := &fakeGen{script: textScript("x", "stop")}
	srv, h := startServer(t, f, WithRole("router"))
	for _, path := range []string{"/readiness", "/liveness", "/health"} {
		if r := do(t, "GET", srv.URL+path, "", nil); r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
	}
	f.set(func() { f.healthy = fmt.Errorf("router: no healthy decode worker") })
	for path, want := range map[string]int{"/readiness": 503, "/health": 503, "/liveness": 200} {
		if r := do(t, "GET", srv.URL+path, "", nil); r.status != want {
			t.Errorf("no workers: %s: %d, want %d (%s)", path, r.status, want, r.body)
		}
	}
	h.Drain()
	if r := do(t, "GET", srv.URL+"/liveness", "", nil); r.status != 503 {
		t.Errorf("draining: /liveness %d, want 503", r.status)
	}

	worker, _ := startServer(t, &fakeGen{script: textScript("x", "stop")}, WithRole("decode"))
	for _, path := range []string{"/readiness", "/liveness"} {
		if r := do(t, "GET", worker.URL+path, "", nil); r.status != 404 {
			t.Errorf("worker %s: %d, want 404", path, r.status)
		}
	}
}
