package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// TestParseOpenAIIsWhatTheEndpointGenerates: the gen.Request ParseOpenAI returns is the
// one the endpoint hands its generator for the same body, and a refusal is the answer
// the endpoint sends.
func TestParseOpenAIIsWhatTheEndpointGenerates(t *testing.T) {
	seed := func() uint64 { return 42 }
	tests := []struct {
		name, path, body string
		status           int
	}{
		{name: "chat", path: "/v1/chat/completions", body: chatBody},
		{name: "chat sampled, no seed", path: "/v1/chat/completions",
			body: `{"model":"ref","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"temperature":0.7,"max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}`},
		{name: "completions", path: "/v1/completions", body: complBody},
		{name: "default max_tokens", path: "/v1/completions", body: `{"prompt":"hello"}`},
		{name: "too long", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5000}`, status: 400},
		{name: "wrong model", path: "/v1/completions", body: `{"model":"other","prompt":"hi"}`, status: 404},
		{name: "bad json", path: "/v1/completions", body: `{"prompt":`, status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeGen{script: textScript("ok", "stop")}
			srv, h := startServer(t, f, WithSeedSource(seed), WithRequestTimeout(7*time.Second))
			r := post(t, srv.URL+tt.path, tt.body)
			p, ref := h.ParseOpenAI(tt.path, []byte(tt.body))
			if tt.status != 0 {
				require.Nil(t, p)
				require.NotNil(t, ref)
				assert.Equal(t, tt.status, r.status)
				assert.Equal(t, tt.status, ref.Status)
				want, err := json.Marshal(ref.Body)
				require.NoError(t, err)
				assert.JSONEq(t, string(want), string(r.body))
				return
			}
			require.Nil(t, ref)
			require.Equal(t, 200, r.status, string(r.body))
			got := f.last()
			assert.NotEmpty(t, got.ID)
			assert.WithinDuration(t, time.Now().Add(7*time.Second), got.Deadline, 5*time.Second)
			got.ID, got.Deadline = "", time.Time{}
			assert.Equal(t, got, p.Request)
			assert.Equal(t, 7*time.Second, h.RequestTimeout())
			assert.Equal(t, "ref", h.Model())
		})
	}
}

func TestRefusalFor(t *testing.T) {
	r := RefusalFor(&gen.OverloadError{RetryAfter: 1500 * time.Millisecond, Reason: "queue full"})
	assert.Equal(t, 503, r.Status)
	assert.Equal(t, 2, r.RetryAfter)
	assert.Equal(t, "overloaded", r.Body.Error.Type)
	assert.Equal(t, 2.0, r.Body.Error.RetryAfterSeconds)
	r = RefusalFor(&gen.StageError{Stage: "transfer", Err: gen.ErrTransfer})
	assert.Equal(t, 502, r.Status)
	assert.Equal(t, "transfer", r.Body.Error.Stage)
	assert.Equal(t, "api: transfer: kv transfer failed", r.Error())
}

// TestNumberOutOfRangeMessage: a number the field cannot hold (a fraction for an
// integer, or out of range) is named as such; the message said the field "must be of JSON
// type number, not number 1e400", a contradiction to the client.
func TestNumberOutOfRangeMessage(t *testing.T) {
	h := New(&fakeGen{}, WithLogger(discardLogger()), WithContextLength(1024))
	for body, want := range map[string]string{
		`{"prompt":"x","max_tokens":1e400}`:  `field "max_tokens" must be an integer in range (got 1e400)`,
		`{"prompt":"x","max_tokens":2.5}`:    `field "max_tokens" must be an integer in range (got 2.5)`,
		`{"prompt":"x","seed":1e20}`:         `field "seed" must be an integer in range (got 1e20)`,
		`{"prompt":"x","temperature":1e999}`: `field "temperature" must be a number in range (got 1e999)`,
		`{"prompt":"x","max_tokens":"5"}`:    `field "max_tokens" must be of JSON type number, not string`,
	} {
		_, r := h.ParseOpenAI("/v1/completions", []byte(body))
		if r == nil || r.Status != 400 || r.Body.Error.Message != want {
			t.Errorf("%s: got %+v, want 400 %q", body, r, want)
		}
	}
}

// TestTypeErrorNamesTheField: a wrong JSON type inside a message names the message
// (messages[1].role, as the other message errors do; encoding/json said "messages.role",
// which of several it did not say), and a body that is not an object says so rather than
// naming a field "".
func TestTypeErrorNamesTheField(t *testing.T) {
	h := New(&fakeGen{}, WithLogger(discardLogger()), WithContextLength(1024))
	for _, tc := range []struct{ path, body, param, msg string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":7,"content":"y"}]}`,
			"messages[1].role", `field "messages[1].role" must be of JSON type string, not number`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x","name":false}]}`,
			"messages[0].name", `field "messages[0].name" must be of JSON type string, not bool`},
		{"/v1/chat/completions", `{"messages":["hi"]}`,
			"messages[0]", `field "messages[0]" must be of JSON type object, not string`},
		{"/v1/completions", `[1,2]`, "", `request body must be a JSON object, not array`},
		{"/v1/chat/completions", `"hi"`, "", `request body must be a JSON object, not string`},
	} {
		_, r := h.ParseOpenAI(tc.path, []byte(tc.body))
		if r == nil {
			t.Errorf("%s: accepted", tc.body)
			continue
		}
		got := ""
		if p := r.Body.Error.Param; p != nil {
			got = *p
		}
		if r.Status != 400 || got != tc.param || r.Body.Error.Message != tc.msg {
			t.Errorf("%s: got %d param %q %q, want param %q %q", tc.body, r.Status, got, r.Body.Error.Message, tc.param, tc.msg)
		}
	}
}
