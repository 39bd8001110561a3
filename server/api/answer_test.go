package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// rec renders what an Answer wrote (Out), as JSON.
func rec(out []string, x Out) []string {
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if x.Begin {
		out = append(out, "BEGIN")
		if x.Role != nil {
			out = append(out, js(x.Role))
		}
	}
	for _, v := range x.Data {
		if v != nil {
			out = append(out, js(v))
		}
	}
	if x.Done {
		out = append(out, "[DONE]")
	}
	if x.Whole != nil {
		out = append(out, "WHOLE "+js(x.Whole))
	}
	return out
}

func toks(s string) gen.Event {
	ev := gen.Event{}
	for _, c := range []byte(s) {
		ev.Tokens = append(ev.Tokens, int(c))
	}
	return ev
}

// TestAnswer: the answer writer the handler and the simulator both drive: a stream's
// headers (and chat's role chunk) at the first event, content, a stop string that ends
// the text before it, the finish and usage chunks and [DONE]; a whole answer at once.
func TestAnswer(t *testing.T) {
	h := New(nil)
	parse := func(path, body string) *Parsed {
		p, ref := h.ParseOpenAI(path, []byte(body))
		require.Nil(t, ref)
		return p
	}
	ck := Chunks{ID: "x", Model: "m", Created: 1}

	t.Run("chat stream with a stop string", func(t *testing.T) {
		p := parse("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":20,"stream":true,
			"stream_options":{"include_usage":true},"stop":["END"]}`)
		ck := ck
		ck.Chat = true
		a, w := p.Answer(ck, h.NewStreamDecoder()), []string(nil)
		o, stopped := a.Event(gen.Event{})
		assert.False(t, stopped, "no text yet")
		assert.True(t, a.Started(), "headers at the first event")
		w = rec(w, o)
		o, stopped = a.Event(toks("abE"))
		assert.False(t, stopped)
		w = rec(w, o)
		o, stopped = a.Event(toks("NDzz"))
		require.True(t, stopped, "stop string matched across events")
		w = rec(w, o)
		o, reason, u := a.Finish(gen.Event{}, true)
		w = rec(w, o)
		assert.Equal(t, "stop", reason)
		assert.Equal(t, 7, u.CompletionTokens)
		assert.Equal(t, u.PromptTokens+7, u.TotalTokens)
		require.Len(t, w, 6)
		assert.Equal(t, "BEGIN", w[0])
		assert.Contains(t, w[1], `"role":"assistant"`)
		assert.Contains(t, w[2], `"content":"ab"`, "the held-back E is not released")
		assert.Contains(t, w[3], `"finish_reason":"stop"`)
		assert.Contains(t, w[4], `"completion_tokens":7`)
		assert.Equal(t, "[DONE]", w[5])
	})

	t.Run("whole completion", func(t *testing.T) {
		p := parse("/v1/completions", `{"prompt":"x","max_tokens":4}`)
		a, w := p.Answer(ck, h.NewStreamDecoder()), []string(nil)
		o, _ := a.Event(toks("ab"))
		w = rec(w, o)
		o, _ = a.Event(gen.Event{Tokens: []int{'c', 'd'}, Done: true})
		w = rec(w, o)
		assert.False(t, a.Started(), "an error now would be a status")
		assert.Empty(t, w, "nothing before the final event")
		o, reason, _ := a.Finish(gen.Event{Done: true}, false)
		w = rec(w, o)
		assert.Equal(t, "length", reason)
		require.Len(t, w, 1)
		assert.Contains(t, w[0], `WHOLE {"id":"x"`)
		assert.Contains(t, w[0], `"text":"abcd"`)
	})
}
