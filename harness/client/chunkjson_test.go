package client

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var chunkSeeds = []string{
	`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`,
	`{"id":"x","object":"chat.completion.chunk","created":1,"model":"ref","choices":[{"index":0,"delta":{"role":"assistant","content":"héllo"},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
	`{"choices":[{"text":"a","finish_reason":null}]}`,
	`{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
	`{"error":{"message":"kv transfer failed","type":"kv_transfer_failed"}}`,
	`{"error":null,"choices":null,"usage":null}`,
	` { "choices" : [ { "delta" : { "content" : "a b" } , "finish_reason" : "length" } ] } `,
	`{"Choices":[{"delta":{"content":"case"}}]}`,
	`{"choices":[{"delta":{"content":"esc\"aped\n"}}]}`,
	`{"choices":[{"delta":{"content":"a"}}],"choices":[]}`,
	`{"choices":[{"delta":"x"}]}`,
	`{"choices":[null,1]}`,
	`{"usage":{"prompt_tokens":1.5}}`,
	`{"usage":{"prompt_tokens":-0,"completion_tokens":0012}}`,
	`{"usage":{"completion_tokens":99999999999999999999}}`,
	`{"choices":[{"finish_reason":7}]}`,
	`{"error":[1,2.5e3,true,false,null,{"a":[]}]}`,
	`{not json`, `[]`, `null`, `{}`, `{} x`, `"s"`, ``, "{\"choices\":[{\"text\":\"\xff\"}]}",
	`{"x":{"y":{"z":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}}`,
}

// The hand decoder agrees with encoding/json on every input: same chunk, same error.
func TestDecodeChunkMatchesEncodingJSON(t *testing.T) {
	for _, s := range chunkSeeds {
		t.Run(strings.ReplaceAll(s, "/", "_"), func(t *testing.T) { sameAsJSON(t, s) })
	}
}

func sameAsJSON(t *testing.T, s string) {
	var want, got chunk
	werr := json.Unmarshal([]byte(s), &want)
	gerr := decodeChunk(s, &got)
	if werr != nil {
		require.EqualError(t, gerr, werr.Error())
	} else {
		require.NoError(t, gerr)
	}
	require.Equal(t, want, got)
}

// FuzzDecodeChunk: a differential test against encoding/json.
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add(s)
	}
	f.Fuzz(sameAsJSON)
}

// BenchmarkDecodeChunk is the per-token decode, hand path against encoding/json.
func BenchmarkDecodeChunk(b *testing.B) {
	s := chunkSeeds[1]
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ch chunk
			if err := decodeChunk(s, &ch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ch chunk
			if err := json.Unmarshal([]byte(s), &ch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
