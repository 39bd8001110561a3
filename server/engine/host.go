package engine

import (
	"time"

	"pdsoak/server/scheduler"
)

// loopHost is the engine as its Core's Host: the IO of the real loop (sockets through
// Transfer, request channels, Prometheus, the snapshots other goroutines read). A
// conversion of *Engine, so handing it to the Core costs nothing, and its methods stay
// off the Engine's API.
type loopHost Engine

var _ Host = (*loopHost)(nil)

func (h *loopHost) StartReceive(t scheduler.Transfer) {
	h.xfer.StartReceive(t.Room, t.Addr, t.Pages, t.NumTokens)
}
func (h *loopHost) StartSend(s scheduler.Send) {
	h.xfer.StartSend(s.Room, s.Pages, s.NumTokens, s.FirstToken)
}
func (h *loopHost) Cancel(room uint64)                         { h.xfer.Cancel(room) }
func (h *loopHost) Dial(addr string) bool                      { return dialable(addr) }
func (h *loopHost) Dialled(down []string) time.Duration        { return (*Engine)(h).dialled(down) }
func (h *loopHost) StepBegan(at time.Time) Gate                { return (*Engine)(h).stepBegan(at) }
func (h *loopHost) StepEnded()                                 { h.stepAt.Store(0) }
func (h *loopHost) Deliver(now time.Time, rd *scheduler.Ready) { (*Engine)(h).deliver(now, rd) }
func (h *loopHost) WantSnapshot(_, _ int) bool                 { return h.snapWant.Swap(false) }
func (h *loopHost) Publish(now time.Time, p Publication)       { (*Engine)(h).publish(now, p) }
