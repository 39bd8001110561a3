package router

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

func TestReadSSE(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		chunks int
		ok     bool
	}{
		{"two events", "data: {\"token_ids\":[1]}\n\ndata: {\"done\":true}\n\n", 2, true},
		{"crlf and comments", ": keepalive\r\n\r\ndata: {\"done\":true}\r\n\r\n", 1, true},
		{"event field ignored", "event: x\ndata: {\"done\":true}\n\n", 1, true},
		{"no done", "data: {\"token_ids\":[1]}\n\n", 1, false},
		{"truncated", "data: {\"done\":tr", 0, false},
		{"done event without its blank line", "data: {\"done\":true}\n", 0, false},
		{"bad json", "data: nope\n\n", 0, false},
		{"multi-line data", "data: {\"done\":\ndata: true}\n\n", 1, true},
		{"event over MaxEventBytes", "data: \"" + strings.Repeat("x", MaxEventBytes) + "\"\n\n", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := readSSE(strings.NewReader(tc.in), func(c gen.WorkerChunk) (bool, error) {
				n++
				return c.Done, nil
			})
			assert.Equal(t, tc.chunks, n, "chunks")
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, errStreamBroken)
			}
		})
	}
}

func FuzzReadSSE(f *testing.F) {
	f.Add("data: {\"token_ids\":[1,2]}\n\ndata: {\"done\":true,\"finish_reason\":\"stop\"}\n\n")
	f.Add("data: {\"done\":true,\"error\":{\"kind\":\"timeout\",\"message\":\"x\"}}\n\n")
	f.Add(": c\r\n\r\n")
	f.Add(strings.Repeat("data: x", 100))
	f.Fuzz(func(t *testing.T, in string) {
		n := 0
		_ = readSSE(strings.NewReader(in), func(c gen.WorkerChunk) (bool, error) {
			n++
			if c.Error != nil {
				_ = c.Error.Err()
			}
			return c.Done, nil
		})
		if n > len(in) {
			t.Fatalf("%d events from %d bytes", n, len(in))
		}
	})
}
