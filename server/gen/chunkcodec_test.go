package gen

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkerChunkCodec(t *testing.T) {
	tests := []struct {
		name string
		c    WorkerChunk
		fast bool // the fast paths handle it (else encoding/json does)
	}{
		{"empty", WorkerChunk{}, true},
		{"tokens", WorkerChunk{TokenIDs: []int{7, 0, -1, 123456789}}, true},
		{"done", WorkerChunk{TokenIDs: []int{9}, Done: true, Finish: "length", PromptTokens: 3, CompletionTokens: 8}, true},
		{"done no tokens", WorkerChunk{Done: true, Finish: "stop", CompletionTokens: 1}, true},
		{"escaped finish", WorkerChunk{Done: true, Finish: `a"<b>&\`}, false},
		{"error", WorkerChunk{Done: true, Error: &WorkerError{Kind: "timeout", Stage: "transfer", Message: "late", RetryAfterSeconds: 1.5}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(&tc.c)
			require.NoError(t, err)
			got, err := AppendWorkerChunk([]byte("x"), &tc.c)
			require.NoError(t, err)
			require.Equal(t, "x"+string(want), string(got))
			_, fast := fastChunk(string(want))
			require.Equal(t, tc.fast, fast)
			back, err := DecodeWorkerChunk(string(want))
			require.NoError(t, err)
			require.Equal(t, tc.c, back)
		})
	}
}

func TestDecodeWorkerChunkAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{}`, `{"token_ids":[]}`, `{"token_ids":null}`, `{"done":false}`, `{"done":true,"done":false}`,
		`{"token_ids":[01]}`, `{"token_ids":[1.0]}`, `{"token_ids":[1e3]}`, `{"token_ids":[-]}`, `{"token_ids":[-0]}`,
		`{"prompt_tokens":1234567890123456789}`, `{"prompt_tokens":99999999999999999999}`, `{ "done":true}`,
		`{"done":true} `, `{"done":true}x`, `{"Done":true}`, `{"finish_reason":"\u0041"}`, `{"unknown":1,"done":true}`,
		`{"token_ids":[1,]}`, `{"token_ids":[1 ,2]}`, `{"done":true,}`, `{`, ``, `[]`, `{"finish_reason":"é"}`,
	} {
		t.Run(in, func(t *testing.T) { agree(t, in) })
	}
}

// agree checks DecodeWorkerChunk against json.Unmarshal on in.
func agree(t *testing.T, in string) {
	t.Helper()
	var want WorkerChunk
	werr := json.Unmarshal([]byte(in), &want)
	got, gerr := DecodeWorkerChunk(in)
	require.Equal(t, werr == nil, gerr == nil, "errors: encoding/json %v, fast %v", werr, gerr)
	if werr == nil {
		require.Equal(t, want, got)
	}
}

func FuzzWorkerChunkCodec(f *testing.F) {
	f.Add(`{"token_ids":[1,2],"done":true,"finish_reason":"length","prompt_tokens":3,"completion_tokens":2}`, []byte{1, 2}, true, "stop", 3, 4)
	f.Add(`{"token_ids":[01]}`, []byte{}, false, "", 0, 0)
	f.Add(`{"error":{"kind":"timeout","message":"m"},"done":true}`, []byte{255}, false, "<&>", -1, 1<<40)
	f.Fuzz(func(t *testing.T, in string, toks []byte, done bool, finish string, prompt, completion int) {
		agree(t, in)
		c := WorkerChunk{Done: done, Finish: finish, PromptTokens: prompt, CompletionTokens: completion}
		for i, b := range toks {
			c.TokenIDs = append(c.TokenIDs, int(b)*(i-3)*1_000_003)
		}
		want, err := json.Marshal(&c)
		require.NoError(t, err)
		got, err := AppendWorkerChunk(nil, &c)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		agree(t, string(got))
	})
}
