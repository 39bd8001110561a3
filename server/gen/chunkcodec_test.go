package gen

import (
	"encoding/json"
	"math"
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

func TestAppendWorkerRequest(t *testing.T) {
	room := uint64(1<<63 - 1)
	tests := []struct {
		name string
		wr   WorkerRequest
	}{
		{"zero", WorkerRequest{}},
		{"empty ids", WorkerRequest{InputIDs: []int{}}},
		{"leg", WorkerRequest{RID: "r-1", InputIDs: []int{256, 104, 105}, BootstrapRoom: &room, BootstrapAddr: "127.0.0.1:8998",
			DeadlineUnixMs: 1796232141333, SamplingParams: WorkerSampling{MaxNewTokens: 8, Temperature: 0.7, TopP: 0.95, Seed: 42, IgnoreEOS: true}}},
		{"tiny and huge floats", WorkerRequest{SamplingParams: WorkerSampling{Temperature: 1e-9, TopP: 1e21}}},
		{"escaped rid", WorkerRequest{RID: `<"é">`}},
		{"whole floats", WorkerRequest{SamplingParams: WorkerSampling{Temperature: 2, TopP: 1}}},
		{"negative zero and big whole floats", WorkerRequest{SamplingParams: WorkerSampling{Temperature: math.Copysign(0, -1), TopP: 1e15}}},
		{"just below the whole-number bound", WorkerRequest{SamplingParams: WorkerSampling{Temperature: -999999999999999, TopP: 1e20}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(&tc.wr)
			require.NoError(t, err)
			got, err := AppendWorkerRequest(nil, &tc.wr)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

func FuzzAppendWorkerRequest(f *testing.F) {
	f.Add("r", []byte{1, 2}, 8, 0.7, 0.9, uint64(3), true, true, uint64(5), "a:1", int64(7))
	f.Add("", []byte(nil), 0, 1e-7, 1e22, uint64(0), false, false, uint64(0), "", int64(0))
	f.Fuzz(func(t *testing.T, rid string, ids []byte, maxNew int, temp, topP float64, seed uint64, eos, hasRoom bool,
		room uint64, addr string, deadline int64) {
		wr := WorkerRequest{RID: rid, BootstrapAddr: addr, DeadlineUnixMs: deadline,
			SamplingParams: WorkerSampling{MaxNewTokens: maxNew, Temperature: temp, TopP: topP, Seed: seed, IgnoreEOS: eos}}
		if ids != nil {
			wr.InputIDs = []int{}
			for i, b := range ids {
				wr.InputIDs = append(wr.InputIDs, int(b)*(i-2)*7919)
			}
		}
		if hasRoom {
			wr.BootstrapRoom = &room
		}
		want, werr := json.Marshal(&wr)
		got, gerr := AppendWorkerRequest(nil, &wr)
		require.Equal(t, werr == nil, gerr == nil)
		if werr == nil {
			require.Equal(t, string(want), string(got))
		}
	})
}
