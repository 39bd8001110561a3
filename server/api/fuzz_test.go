package api

import (
	"net/http"
	"reflect"
	"testing"
	"unicode/utf8"
)

// checkJob asserts what every accepted request must satisfy.
func checkJob(t *testing.T, h *Handler, j *job, e *apiError, body []byte) {
	t.Helper()
	if (j == nil) == (e == nil) {
		t.Fatalf("exactly one of job and error must be set: %v %v", j, e)
	}
	if e != nil {
		if e.status < 400 || e.status > 499 || e.msg == "" || e.kind == "" {
			t.Fatalf("bad error %+v for %q", e, body)
		}
		return
	}
	if !utf8.Valid(body) {
		t.Fatalf("accepted invalid UTF-8: %q", body)
	}
	r := j.req
	if len(r.Prompt) == 0 || r.MaxTokens < 1 || len(r.Prompt)+r.MaxTokens > h.contextLen {
		t.Fatalf("accepted prompt %d max_tokens %d over context %d", len(r.Prompt), r.MaxTokens, h.contextLen)
	}
	if s := r.Sampling; s.Temperature < 0 || s.Temperature > 2 || s.TopP < 0 || s.TopP > 1 {
		t.Fatalf("accepted sampling %+v", s)
	}
	for _, s := range j.stop {
		if s == "" {
			t.Fatal("accepted an empty stop string")
		}
	}
}

func fuzzHandler() *Handler {
	return New(&fakeGen{}, WithContextLength(512), WithVocabSize(264), WithLogger(discardLogger()),
		WithSeedSource(func() uint64 { return 1 }))
}

func FuzzCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"ref","prompt":"hello","max_tokens":8,"temperature":0.7,"top_p":0.9,"stop":["\n"],"seed":3,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":["one"],"stop":"x"}`,
		`{"prompt":[256,1,2,3],"max_tokens":1}`,
		`{"prompt":"","n":2}`,
		`{"prompt":"x","max_tokens":1e309}`,
		`{"prompt":"x","temperature":null,"top_p":0}`,
		`{"prompt":{"a":1}}`,
		"{\"prompt\":\"\xc3\"}",
		`[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	h := fuzzHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		j, e := h.parseCompletion(body)
		checkJob(t, h, j, e, body)
	})
}

func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"ref","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_completion_tokens":4}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
		`{"messages":[{"role":"assistant","content":null},{"role":"user","content":"q"}],"stop":["a","b"]}`,
		`{"messages":[{"role":"user"}]}`,
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}`,
		`{"messages":null}`,
		`{"messages":[{"role":1}]}`,
	} {
		f.Add([]byte(s))
	}
	h := fuzzHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		j, e := h.parseChat(body)
		checkJob(t, h, j, e, body)
		if j != nil && !j.chat {
			t.Fatal("chat job not marked chat")
		}
	})
}

func FuzzWorkerRequest(f *testing.F) {
	for _, s := range []string{
		`{"rid":"a","input_ids":[256,1,2],"sampling_params":{"max_new_tokens":4,"temperature":0},"bootstrap_room":5,"bootstrap_addr":"127.0.0.1:1"}`,
		`{"input_ids":[1],"sampling_params":{"max_new_tokens":1},"deadline_unix_ms":-1}`,
		`{"input_ids":[999],"sampling_params":{"max_new_tokens":1}}`,
	} {
		f.Add([]byte(s))
	}
	h := fuzzHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		r, e := h.parseWorker(body)
		if (r == nil) == (e == nil) {
			t.Fatal("exactly one of request and error must be set")
		}
		// A trailing space keeps gen.FastWorkerRequest out: encoding/json alone must
		// come to the same request or the same error.
		rj, ej := h.parseWorker(append(append([]byte(nil), body...), ' '))
		if !reflect.DeepEqual(r, rj) || !reflect.DeepEqual(e, ej) {
			t.Fatalf("fast path %+v, %+v; encoding/json %+v, %+v", r, e, rj, ej)
		}
		if e != nil {
			if e.status != http.StatusBadRequest {
				t.Fatalf("status %d", e.status)
			}
			return
		}
		if len(r.Prompt) == 0 || r.MaxTokens < 1 || len(r.Prompt)+r.MaxTokens > h.contextLen {
			t.Fatalf("accepted %d + %d", len(r.Prompt), r.MaxTokens)
		}
		for _, id := range r.Prompt {
			if id < 0 || id >= 264 {
				t.Fatalf("accepted id %d", id)
			}
		}
	})
}

func FuzzStopMatcher(f *testing.F) {
	f.Add("hello world", "wor", 3)
	f.Add("ababab", "bab", 1)
	f.Fuzz(func(t *testing.T, out, stop string, size int) {
		if stop == "" || size <= 0 || size > 64 {
			return
		}
		m := &stopMatcher{stops: []string{stop}}
		var got string
		matched := false
		for i := 0; i < len(out) && !matched; i += size {
			var s string
			s, matched = m.push(out[i:min(i+size, len(out))])
			got += s
		}
		if !matched {
			got += m.flush()
		}
		want := out
		if i := indexOf(out, stop); i >= 0 {
			want = out[:i]
		}
		if got != want {
			t.Fatalf("out %q stop %q size %d: got %q want %q", out, stop, size, got, want)
		}
	})
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
