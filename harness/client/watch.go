package client

import (
	"context"
	"sync"
)

// watch is how the end of a caller's context reaches its requests: one context.AfterFunc
// per caller context, however many requests run under it (the runner passes one context
// to every request), rather than one per request. An AfterFunc costs two allocations and
// about 170 bytes for as long as the request lasts, on every held stream.
type watch struct {
	mu   sync.Mutex
	sets map[context.Context]*watchSet
}

// watchSet is the requests in flight under one context.
type watchSet struct {
	reqs map[*reqState]struct{}
	stop func() bool // the context's AfterFunc
}

// maxIdleSets bounds the sets kept with no request in flight: a set lives until its
// context ends (a context that ends cleans its own), and past this many empty ones a
// set is dropped when it empties, so contexts that never end cannot pile up.
const maxIdleSets = 64

// add makes ctx's end cancel st with ctx's cause (ctx must be cancellable: Done non-nil).
func (w *watch) add(ctx context.Context, st *reqState) {
	w.mu.Lock()
	ws := w.sets[ctx]
	if ws == nil {
		if w.sets == nil {
			w.sets = map[context.Context]*watchSet{}
		}
		ws = &watchSet{reqs: map[*reqState]struct{}{}}
		w.sets[ctx] = ws
		ws.stop = context.AfterFunc(ctx, func() { w.ended(ctx, ws) })
	}
	ws.reqs[st] = struct{}{}
	w.mu.Unlock()
}

// remove undoes add.
func (w *watch) remove(ctx context.Context, st *reqState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.sets[ctx]
	if ws == nil {
		return
	}
	delete(ws.reqs, st)
	if len(ws.reqs) == 0 && len(w.sets) > maxIdleSets {
		ws.stop()
		delete(w.sets, ctx)
	}
}

// ended cancels every request of ws, ctx having ended; a request added later finds a
// fresh set, whose AfterFunc runs at once.
func (w *watch) ended(ctx context.Context, ws *watchSet) {
	w.mu.Lock()
	if w.sets[ctx] == ws {
		delete(w.sets, ctx)
	}
	reqs := ws.reqs
	ws.reqs = map[*reqState]struct{}{} // a remove still to come finds nothing
	w.mu.Unlock()
	cause := context.Cause(ctx)
	for st := range reqs {
		st.cancel(cause)
	}
}
