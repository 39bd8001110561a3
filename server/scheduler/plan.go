package scheduler

import (
	"time"

	"pdsoak/kernels"
	"pdsoak/server/kvpool"
)

// Ready returns the decisions since the previous call. When no batch is in flight it
// first moves queues (resume retracted, preallocate, admit) and plans the next batch.
func (s *Scheduler) Ready(now time.Time) Ready {
	s.touch(now)
	if s.batch == nil {
		s.plan(now)
	}
	if s.strict() && s.statsDue {
		st := s.Stats()
		s.out.Stats = &st
	}
	s.statsDue = false
	rd := s.out
	s.out = Ready{}
	return rd
}

func (s *Scheduler) alloc(r *request, tokens int) bool {
	need := s.pagesFor(tokens) - len(r.pages)
	if need <= 0 {
		return true
	}
	s.evictFor(need)
	got, ok := s.pool.Alloc(kvpool.Owner(r.seq), need)
	if !ok {
		return false
	}
	r.pages = append(r.pages, got...)
	return true
}

func (s *Scheduler) plan(now time.Time) {
	s.kvBlocked = 0
	if s.cfg.Role == RoleDecode {
		s.resumeRetracted(now)
		s.preallocate(now)
	}
	if s.cfg.Role != RolePrefill {
		s.growRunning(now)
	}
	budget := s.cfg.MaxPrefillTokens
	prefills := 0
	var batch []*request
	for _, r := range s.running { // continuing work, oldest first: decodes and unfinished chunked prefills
		if n := s.inputLen(r, &budget, &prefills); n > 0 {
			r.inLen = n
			batch = append(batch, r)
		}
	}
	batch = append(batch, s.admit(now, &budget, &prefills)...)
	if len(batch) == 0 {
		return
	}
	s.batch, s.batchStart = batch, now
	rd := &s.out
	rd.Batch = make([]kernels.SeqInput, len(batch))
	rd.BatchSeqs = make([]uint64, len(batch))
	for i, r := range batch {
		r.inBatch = true
		in := r.tokens[r.cached : r.cached+r.inLen]
		rd.Batch[i] = kernels.SeqInput{Tokens: in, Pos: r.cached, Pages: r.pages,
			Sample: r.cached+r.inLen == len(r.tokens), Sampling: r.req.Sampling}
		rd.BatchSeqs[i] = r.seq
		if r.isDecode() {
			rd.DecodeTokens++
		} else {
			rd.PrefillTokens += len(in)
		}
	}
}

// isDecode reports whether r's next input is the single token it sampled last.
func (r *request) isDecode() bool { return r.computed && len(r.tokens)-r.cached == 1 }

// inputLen is how many of r's uncached tokens go into this step (0: none this step).
// Decodes are free; prefills draw on the step's MaxPrefillTokens budget, cut into
// ChunkedPrefillSize chunks when chunking is on. Without chunking a prompt longer than
// the remaining budget waits, unless it is the step's first prefill (it then runs alone).
func (s *Scheduler) inputLen(r *request, budget, prefills *int) int {
	if r.isDecode() {
		return 1
	}
	n := len(r.tokens) - r.cached
	if c := s.cfg.ChunkedPrefillSize; c > 0 {
		n = min(n, c, *budget)
	} else if n > *budget && *prefills > 0 {
		n = 0
	}
	if n <= 0 {
		return 0
	}
	*budget -= n
	*prefills++
	return n
}

// growRunning makes sure every running request has pages for all of its tokens,
// retracting the youngest running requests when the pool runs out.
func (s *Scheduler) growRunning(now time.Time) {
	for i := 0; i < len(s.running); i++ {
		r := s.running[i]
		for !s.alloc(r, len(r.tokens)) {
			victim := s.running[len(s.running)-1] // youngest admitted
			s.retract(now, victim)
			if victim == r {
				break
			}
		}
	}
}

func (s *Scheduler) retract(now time.Time, r *request) {
	s.release(r)
	s.out.Retracted = append(s.out.Retracted, r.seq)
	if s.cfg.Role == RoleDecode && s.cfg.Bug(BugDecodeOOMRequeue) {
		// sglang#6857: the retracted request goes back to the prealloc queue with its
		// transfer still marked done (transferStarted), and preallocate skips requests
		// not waiting for input: it is never popped again.
		s.moveTo(now, r, StagePrealloc, false)
		return
	}
	if s.cfg.Role == RoleDecode {
		s.moveTo(now, r, StageRetracted, false)
	} else {
		s.moveTo(now, r, StageWaiting, true)
	}
}

// admit moves waiting requests into the batch: FIFO, bounded by the running limit, the
// prefill token budget and free pages.
func (s *Scheduler) admit(now time.Time, budget, prefills *int) []*request {
	var admitted []*request
	for len(s.waiting) > 0 && len(s.running) < s.runLimit() {
		r := s.waiting[0]
		s.matchPrefix(r)
		b, p := *budget, *prefills
		n := s.inputLen(r, &b, &p)
		if n == 0 {
			s.unmatch(r)
			break
		}
		if !s.alloc(r, len(r.tokens)) {
			s.unmatch(r)
			s.kvBlocked++
			break
		}
		s.counted(r)
		*budget, *prefills = b, p
		r.inLen = n
		st := StageRunning
		if s.cfg.Role == RolePrefill {
			st = StageForward
		}
		s.moveTo(now, r, st, false)
		admitted = append(admitted, r)
	}
	return admitted
}

// resumeRetracted gives retracted decode requests their pages back, oldest first.
func (s *Scheduler) resumeRetracted(now time.Time) {
	for len(s.retracted) > 0 {
		r := s.retracted[0]
		need := len(r.tokens)
		if !s.strict() && s.allocatableTokens(false) < need+s.cfg.ReservedDecodeTokens {
			return
		}
		if !s.alloc(r, need) {
			s.kvBlocked += len(s.retracted)
			return
		}
		s.moveTo(now, r, StageWaiting, true)
	}
}

// allocatableTokens is SGLang's DecodePreallocQueue._allocatable_tokens: free tokens
// minus the headroom reserved for requests already past prealloc and for retracted ones.
func (s *Scheduler) allocatableTokens(countRetracted bool) int {
	free := s.pool.FreePages() * s.cfg.PageSize
	free -= s.cfg.ReservedDecodeTokens * (len(s.running) + len(s.transfer) + len(s.waiting))
	if countRetracted {
		for _, r := range s.retracted {
			free -= len(r.tokens) + s.cfg.ReservedDecodeTokens
		}
	}
	return free
}

// preallocate reserves pages for the prompt of prealloc requests and starts their
// transfers. SGLang: FIFO, stops at the first request that does not fit, nothing while a
// request is retracted, at most MaxRunningRequests requests past prealloc. Strict: skips
// requests that do not fit (each is bounded by PreallocTimeout) and keeps the pages the
// oldest retracted request needs.
func (s *Scheduler) preallocate(now time.Time) {
	if !s.strict() {
		if len(s.retracted) > 0 {
			return
		}
		for i := 0; i < len(s.prealloc); {
			r := s.prealloc[i]
			if r.transferStarted {
				i++ // BugDecodeOOMRequeue only: not waiting for input, skipped (#6857)
				continue
			}
			busy := len(s.running) + len(s.waiting) + len(s.transfer)
			if busy >= s.cfg.MaxRunningRequests {
				return
			}
			if s.cfg.Bug(BugBootstrapFreezeAtRate) && busy+len(s.prealloc)-i > s.cfg.MaxRunningRequests {
				// sglang#10110: the window counts every room still pending; past it no
				// room is preallocated (so none registers with prefill), ever.
				return
			}
			if r.nPrompt+s.cfg.ReservedDecodeTokens > s.allocatableTokens(true) || !s.alloc(r, r.nPrompt+1) {
				return // head-of-line: the queue waits for its head
			}
			s.startTransfer(now, r) // removes r from s.prealloc
		}
		return
	}
	keep := 0
	if len(s.retracted) > 0 {
		keep = s.pagesFor(len(s.retracted[0].tokens) + 1)
	}
	for i := 0; i < len(s.prealloc); {
		r := s.prealloc[i]
		if s.pool.FreePages()-s.pagesFor(r.nPrompt+1) < keep || !s.alloc(r, r.nPrompt+1) {
			s.kvBlocked++
			i++
			continue
		}
		s.startTransfer(now, r) // removes r from s.prealloc
	}
}

// startTransfer moves r to the transfer queue. r holds pages for the prompt and the
// first generated token, so that once its KV arrives it never needs another page to
// join the batch (a waiting queue holding every page could otherwise stall decode);
// only the prompt's pages are transferred, exactly as many as prefill computed.
func (s *Scheduler) startTransfer(now time.Time, r *request) {
	s.moveTo(now, r, StageTransfer, false)
	r.transferStarted = true
	s.out.Transfers = append(s.out.Transfers, Transfer{Seq: r.seq, ID: r.id, Room: r.room, Addr: r.req.Bootstrap.Addr,
		Pages: append([]int32(nil), r.pages[:s.pagesFor(r.nPrompt)]...), NumTokens: r.nPrompt})
}
