package traces

import (
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the synthetic BurstGPT excerpt")

const shipped = "../scenarios/traces"

func TestParseFormats(t *testing.T) {
	tests := []struct {
		name, data, format string
		want               []Request
	}{
		{"mooncake", `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}
{"timestamp": 1500, "input_length": 512, "output_length": 7, "hash_ids": [0]}
`, Mooncake, []Request{
			{At: 0, Input: 600, Output: 5, Blocks: []uint64{0, 1}, Line: 1},
			{At: 1500 * time.Millisecond, Input: 512, Output: 7, Blocks: []uint64{0}, Line: 2},
		}},
		{"azure", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n2023-11-16 18:15:50.9951690,396,109\r\n", Azure, []Request{
			{At: 0, Input: 374, Output: 44, Blocks: uniqueBlocks(2, 374), Line: 2},
			{At: 4314579 * time.Microsecond, Input: 396, Output: 109, Blocks: uniqueBlocks(3, 396), Line: 3},
		}},
		{"burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n7,GPT-4,1000,0,1000,API log\n", BurstGPT, []Request{
			{At: 0, Input: 472, Output: 18, Blocks: uniqueBlocks(2, 472), Line: 2},
			{At: 2 * time.Second, Input: 1000, Output: 0, Blocks: uniqueBlocks(3, 1000), Line: 3},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Detect([]byte(tt.data))
			require.NoError(t, err)
			assert.Equal(t, tt.format, f)
			tr, err := Parse("t", []byte(tt.data), "")
			require.NoError(t, err)
			assert.Equal(t, tt.format, tr.Format)
			assert.Equal(t, tt.want, tr.Requests)
		})
	}
}

func TestParseErrorsNameLineAndField(t *testing.T) {
	tests := []struct{ name, data, format, want string }{
		{"missing field", `{"timestamp": 0, "output_length": 5}`, Mooncake, "traces: f:1: input_length: missing"},
		{"bad json", "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{oops", Mooncake, "traces: f:2: not a JSON object"},
		{"too many blocks", `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1, 2]}`, Mooncake, "traces: f:1: hash_ids: 2 blocks for 10 input tokens"},
		{"negative ts", `{"timestamp": -5, "input_length": 10, "output_length": 1}`, Mooncake, "traces: f:1: timestamp: must be"},
		// A misspelt hash_ids was ignored: every request got blocks of its own, and the
		// replay's prefix reuse fell to 0 without a word.
		{"unknown key", `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_id": [0]}`, Mooncake,
			`traces: f:1: hash_id: unknown field (want timestamp, input_length, output_length, hash_ids)`},
		// It said "not a JSON object: json: cannot unmarshal string into Go struct field
		// mooncakeLine.input_length of type int": a Go type, and no field in its place.
		{"wrong type", `{"timestamp": 0, "input_length": "10", "output_length": 1}`, Mooncake,
			`traces: f:1: input_length: must be a whole number, got a JSON string`},
		{"fractional tokens", `{"timestamp": 0, "input_length": 10.5, "output_length": 1}`, Mooncake,
			`traces: f:1: input_length: must be a whole number, got 10.5`},
		{"azure header", "TIMESTAMP,Context,GeneratedTokens\n", Azure, `traces: f:1: column 2 is "Context"`},
		{"azure time", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n", Azure, "traces: f:2: TIMESTAMP: not a timestamp"},
		{"azure tokens", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,1,2\n2023-11-16 18:15:47.1,x,2\n", Azure, `traces: f:3: ContextTokens: not a token count: "x"`},
		{"burstgpt short row", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,3\n", BurstGPT, "traces: f:2: 3 columns, want 4"},
		{"empty", "", "", "traces: empty trace"},
		{"unknown", "hello,world\n", "", "traces: unknown format"},
		{"no rows", "Timestamp,Model,Request tokens,Response tokens\n", BurstGPT, "traces: f:1: no requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f", []byte(tt.data), tt.format)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	var e *Error
	_, err := Parse("f", []byte(`{"timestamp": 0}`), Mooncake)
	require.True(t, errors.As(err, &e))
	assert.Equal(t, 1, e.Line)
}

func TestWindow(t *testing.T) {
	tr := &Trace{Requests: []Request{{At: 0}, {At: time.Second}, {At: 2 * time.Second}, {At: 4 * time.Second}, {At: 8 * time.Second}}}
	ats := func(rs []Request) (out []time.Duration) {
		for _, r := range rs {
			out = append(out, r.At)
		}
		return out
	}
	s := time.Second
	assert.Equal(t, []time.Duration{0, s, 2 * s, 4 * s, 8 * s}, ats(tr.Window(Window{})))
	assert.Equal(t, []time.Duration{0, s / 2, s, 2 * s, 4 * s}, ats(tr.Window(Window{Speedup: 2})))
	assert.Equal(t, []time.Duration{0, 2 * s}, ats(tr.Window(Window{Start: 2 * s, Limit: 2})))
	assert.Equal(t, []time.Duration{0, s, 2 * s}, ats(tr.Window(Window{Until: 3 * s})))
	// 5 requests over 8s at a mean of 1 req/s: 4 gaps over 4s.
	got := tr.Window(Window{Rate: 1})
	assert.Equal(t, 4*s, got[len(got)-1].At)
	assert.Equal(t, time.Second, tr.Requests[1].At, "Window must not modify the trace")
}

func TestPromptSharesBlocks(t *testing.T) {
	a := Request{Input: 3 * BlockTokens, Blocks: []uint64{7, 8, 9}}
	b := Request{Input: 2*BlockTokens + 100, Blocks: []uint64{7, 8, 10}}
	c := Request{Input: BlockTokens + 10, Blocks: []uint64{7, 8}, Line: 3}
	pa, pb, pc := Prompt(a, 64, 1), Prompt(b, 64, 1), Prompt(c, 64, 1)
	assert.Len(t, pa, 3*64)
	assert.Len(t, pb, 2*64+13) // 612 tokens at 64/512 rounds to 77
	assert.Len(t, pc, 64+1)
	assert.Equal(t, pa[:128], pb[:128], "shared ids, shared text")
	assert.NotEqual(t, pa[128:len(pb)], pb[128:])
	assert.Equal(t, pa[:len(pc)], pc, "a short last block is a prefix of the full block")
	assert.NotEqual(t, pa, Prompt(a, 64, 2), "the salt changes every block")
	assert.Len(t, Prompt(Request{Input: 1000, Blocks: []uint64{1}}, 0, 1), 1000)
}

func TestReuse(t *testing.T) {
	rs := []Request{
		{Input: 1024, Blocks: []uint64{0, 1}},
		{Input: 1024, Blocks: []uint64{0, 2}}, // block 0 hits
		{Input: 1000, Blocks: []uint64{0, 1}}, // both hit: 512 + 488
		{Input: 1024, Blocks: []uint64{5, 1}}, // block 1 under another parent: a miss
	}
	hit, total := Reuse(rs)
	assert.Equal(t, 512+512+488, hit)
	assert.Equal(t, 1024+1024+1000+1024, total)
}

// TestShippedExcerpts parses every trace shipped with the scenarios, with exact counts.
func TestShippedExcerpts(t *testing.T) {
	want := map[string]struct {
		format string
		n      int
	}{
		"mooncake-conversation.jsonl": {Mooncake, 200},
		"azure-conv.csv":              {Azure, 300},
		"burstgpt-synthetic.csv":      {BurstGPT, 300},
	}
	for file, w := range want {
		data, err := os.ReadFile(filepath.Join(shipped, file))
		require.NoError(t, err)
		tr, err := Parse(file, data, "")
		require.NoError(t, err, file)
		assert.Equal(t, w.format, tr.Format, file)
		assert.Len(t, tr.Requests, w.n, file)
	}
}

// TestSynthBurstGPTShipped regenerates the synthetic BurstGPT excerpt (it is generated,
// not BurstGPT's data; see scenarios/traces/README.md).
func TestSynthBurstGPTShipped(t *testing.T) {
	got := SynthBurstGPT(rand.New(rand.NewPCG(24, 24)), 300, 2)
	file := filepath.Join(shipped, "burstgpt-synthetic.csv")
	if *update {
		require.NoError(t, os.WriteFile(file, got, 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "run go test ./traces -update")
	tr, err := Parse("synthetic", got, "")
	require.NoError(t, err)
	span := tr.Requests[len(tr.Requests)-1].At.Seconds()
	rate := float64(len(tr.Requests)-1) / span
	assert.InDelta(t, 2, rate, 0.5, "mean rate %.2f", rate)
	assert.True(t, strings.HasPrefix(string(got), "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"))
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`,
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n",
		"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n",
		`{"timestamp": 1e300, "input_length": -1}`,
		"Timestamp,Model,Request tokens,Response tokens\n\"5,x\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Parse("fuzz", data, "")
		if err != nil {
			return
		}
		require.NotEmpty(t, tr.Requests)
		prev := time.Duration(0)
		for _, r := range tr.Requests {
			require.GreaterOrEqual(t, r.At, prev, "sorted from zero")
			prev = r.At
			require.GreaterOrEqual(t, r.Input, 0)
			require.GreaterOrEqual(t, r.Output, 0)
			require.NotEmpty(t, r.Blocks)
		}
		for _, r := range tr.Window(Window{Speedup: 1e-9, Until: time.Hour}) {
			require.GreaterOrEqual(t, r.At, time.Duration(0), "slowed down, still from zero")
		}
		w := tr.Window(Window{Speedup: 3, Limit: 10})
		if len(w) > 0 && w[0].Input < 4096 {
			require.Len(t, Prompt(w[0], 16, 1), Scaled(w[0], 16))
		}
	})
}

// TestMooncakeExcerptReuse pins the excerpt's own reuse, the figure README.md and the
// scenario's header state and the cache's hit rate is compared with.
func TestMooncakeExcerptReuse(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(shipped, "mooncake-conversation.jsonl"))
	require.NoError(t, err)
	tr, err := Parse("m", data, "")
	require.NoError(t, err)
	hit, total := Reuse(tr.Requests)
	t.Logf("reuse %d/%d = %.4f", hit, total, float64(hit)/float64(total))
	assert.InDelta(t, 0.0593, float64(hit)/float64(total), 0.0005)
}

// TestWindowSlowdownPastTheEnd: a slowed-down arrival beyond time.Duration's range
// overflowed to a negative time, fell inside the window and was sent at once.
func TestWindowSlowdownPastTheEnd(t *testing.T) {
	tr, err := Parse("f", []byte(`{"timestamp": 0, "input_length": 1, "output_length": 1}
{"timestamp": 31536000000, "input_length": 1, "output_length": 1}
`), Mooncake)
	require.NoError(t, err)
	for _, w := range []Window{{Speedup: 0.001, Until: time.Hour}, {Rate: 1e-12, Until: time.Hour}} {
		got := tr.Window(w)
		require.Len(t, got, 1, "%+v: %+v", w, got)
		assert.Equal(t, time.Duration(0), got[0].At)
	}
	assert.Len(t, tr.Window(Window{Speedup: 0.001}), 2, "no Until: every request, the late one at the end of time")
}
