package netproxy

import (
	"testing"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An interrupt (another toxic added or removed) reaches a counter that holds a chunk
// nobody takes: the counter lets go within its flush bound and counts the lost bytes,
// instead of holding the interrupt — and the link's lock behind it — for good. A reader
// that comes back in time gets the chunk and nothing is lost.
func TestCounterInterruptWhileHoldingChunk(t *testing.T) {
	tests := []struct {
		name    string
		reader  bool // someone takes the output while the interrupt is pending
		dropped int64
	}{
		{name: "nobody reads: dropped after the flush bound", dropped: 5},
		{name: "reader comes back: delivered", reader: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCounter()
			t.Cleanup(func() { counters.Delete(c.id) })
			in := make(chan *stream.StreamChunk)
			out := make(chan *stream.StreamChunk)
			stub := toxics.NewToxicStub(in, out)
			w := &toxics.ToxicWrapper{Toxic: &counterToxic{ID: c.id}, Toxicity: 1}
			ran := make(chan struct{})
			go func() { defer close(ran); stub.Run(w) }()
			in <- &stream.StreamChunk{Data: []byte("hello")} // taken: the counter now holds it
			var got *stream.StreamChunk
			read := make(chan struct{})
			if tt.reader {
				go func() { defer close(read); got = <-out }()
			} else {
				close(read)
			}
			require.True(t, stub.InterruptToxic(), "the stub is open")
			<-ran
			<-read
			assert.Equal(t, int64(5), c.bytes.Load())
			assert.Equal(t, tt.dropped, c.dropped.Load())
			if tt.reader {
				require.NotNil(t, got)
				assert.Equal(t, "hello", string(got.Data))
			}
		})
	}
}
