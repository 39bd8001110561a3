package router

import (
	"testing"

	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// Legs go back to the pool empty: a chunk or an end no one read (the attempt was
// cancelled mid-stream) must not reach the next attempt that takes them.
func TestLegsRecycleDrains(t *testing.T) {
	l := newLegs()
	l.prefillDone <- leg{}
	for i := range cap(l.chunks) {
		l.chunks <- decodeChunk{c: gen.WorkerChunk{TokenIDs: []int{i}}}
	}
	l.recycle()
	require.Zero(t, len(l.prefillDone), "prefillDone")
	require.Zero(t, len(l.chunks), "chunks")
	require.Equal(t, 8, cap(l.chunks))
}
