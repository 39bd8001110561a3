package kvtransfer

import (
	"sync"
	"sync/atomic"
)

// pageGuard lets a connection's reader write payloads straight into a room's destination
// pages while the room can end at any time (cancelled by decode, timed out): the engine
// reuses a cancelled room's pages as soon as Cancel returns. Every write into pages (a
// copy out of the read buffer, one non-blocking readv) holds mu and first checks the
// room's gone flag; once it is set, the rest of the payloads go to a discard buffer. A
// room that ends while the reader is on it waits on mu (barrier), so no byte lands in its
// pages after that. The reader never holds mu while it waits for data.
type pageGuard struct {
	mu   sync.Mutex
	gone *atomic.Bool // the room being read; nil: writes go to the discard buffer already
	// sink receives the payloads nobody wants (a room that is gone); its bytes are
	// never read.
	sink []byte
}

// lock is taken around every write into dst's slices; it sends them to the sink once the
// room is gone.
func (g *pageGuard) lock(dst [][]byte) {
	g.mu.Lock()
	if g.gone != nil && g.gone.Load() {
		g.gone = nil
		for i, d := range dst {
			dst[i] = g.discard(len(d))
		}
	}
}

func (g *pageGuard) unlock() { g.mu.Unlock() }

// barrier returns once no write under lock is in progress.
func (g *pageGuard) barrier() {
	g.mu.Lock()
	//lint:ignore SA2001 an empty critical section is the point: wait for the holder
	g.mu.Unlock()
}

// discard is n bytes of the sink (shared by every slice: what lands there is dropped).
func (g *pageGuard) discard(n int) []byte {
	if cap(g.sink) < n {
		g.sink = make([]byte, n)
	}
	return g.sink[:n]
}
