package sse

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A released reader is done: what it returned stays valid, later calls say so, and
// its buffer serves the next reader, which parses its own stream from the start.
func TestReleaseEndsReaderAndReusesBuffer(t *testing.T) {
	r := NewReader(strings.NewReader("data: one\n\ndata: two\n\n"))
	ev, err := r.Next()
	require.NoError(t, err)
	r.Release()
	require.Equal(t, "one", ev.Data)
	_, err = r.Next()
	require.True(t, errors.Is(err, ErrReleased), "got %v", err)
	r.Release() // twice is harmless

	r2 := NewReader(strings.NewReader("\xef\xbb\xbfdata: three\r\n\r\ndata: x"))
	ev, err = r2.Next()
	require.NoError(t, err)
	require.Equal(t, "three", ev.Data)
	_, err = r2.Next()
	require.ErrorIs(t, err, ErrUnexpectedEOF)
	r2.Release()
}

// BenchmarkShortStreams reads one short stream per iteration, as the router's legs
// do; with Release the reader's buffer comes from the pool.
func BenchmarkShortStreams(b *testing.B) {
	const stream = "data: {\"token_ids\":[1],\"text\":\"a\"}\n\ndata: {\"done\":true}\n\n"
	for _, release := range []bool{false, true} {
		name := map[bool]string{false: "no-release", true: "release"}[release]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				r := NewReader(strings.NewReader(stream))
				for {
					if _, err := r.Next(); err != nil {
						break
					}
				}
				if release {
					r.Release()
				}
			}
		})
	}
}
