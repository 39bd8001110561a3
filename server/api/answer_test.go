package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// recWriter records what an Answer writes, as JSON (Writer).
type recWriter struct{ out []string }

func (w *recWriter) Begin(first any) {
	w.out = append(w.out, "BEGIN")
	if first != nil {
		w.Data(first)
	}
}

func (w *recWriter) Data(v any) {
	if v == nil {
		w.out = append(w.out, "[DONE]")
		return
	}
	b, _ := json.Marshal(v)
	w.out = append(w.out, string(b))
}

func (w *recWriter) Whole(v any) { b, _ := json.Marshal(v); w.out = append(w.out, "WHOLE "+string(b)) }

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
		a, w := p.Answer(ck, h.NewStreamDecoder()), &recWriter{}
		assert.False(t, a.Event(w, gen.Event{}), "no text yet")
		assert.True(t, a.Started(), "headers at the first event")
		assert.False(t, a.Event(w, toks("abE")))
		require.True(t, a.Event(w, toks("NDzz")), "stop string matched across events")
		reason, u := a.Finish(w, gen.Event{}, true)
		assert.Equal(t, "stop", reason)
		assert.Equal(t, 7, u.CompletionTokens)
		assert.Equal(t, u.PromptTokens+7, u.TotalTokens)
		require.Len(t, w.out, 6)
		assert.Equal(t, "BEGIN", w.out[0])
		assert.Contains(t, w.out[1], `"role":"assistant"`)
		assert.Contains(t, w.out[2], `"content":"ab"`, "the held-back E is not released")
		assert.Contains(t, w.out[3], `"finish_reason":"stop"`)
		assert.Contains(t, w.out[4], `"completion_tokens":7`)
		assert.Equal(t, "[DONE]", w.out[5])
	})

	t.Run("whole completion", func(t *testing.T) {
		p := parse("/v1/completions", `{"prompt":"x","max_tokens":4}`)
		a, w := p.Answer(ck, h.NewStreamDecoder()), &recWriter{}
		a.Event(w, toks("ab"))
		a.Event(w, gen.Event{Tokens: []int{'c', 'd'}, Done: true})
		assert.False(t, a.Started(), "an error now would be a status")
		assert.Empty(t, w.out, "nothing before the final event")
		reason, _ := a.Finish(w, gen.Event{Done: true}, false)
		assert.Equal(t, "length", reason)
		require.Len(t, w.out, 1)
		assert.Contains(t, w.out[0], `WHOLE {"id":"x"`)
		assert.Contains(t, w.out[0], `"text":"abcd"`)
	})
}
