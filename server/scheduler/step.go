package scheduler

import (
	"fmt"
	"slices"
	"time"

	"pdsoak/server/gen"
)

// A step's result: sampled tokens applied to the batch.

// sampled appends tok to r's output, emits it and finishes r when it is done.
func (s *Scheduler) sampled(now time.Time, r *request, tok int) {
	s.sampledInto(now, r, tok, nil)
}

// sampledInto is sampled with the emitted slice carved out of buf when it has room (one
// allocation per step instead of one per request).
func (s *Scheduler) sampledInto(now time.Time, r *request, tok int, buf *[]int) {
	r.tokens = append(r.tokens, tok)
	s.generated++
	s.lastOutput = now
	if tok == s.cfg.EOS && !r.req.IgnoreEOS {
		s.finish(now, r, "stop", nil)
		return
	}
	var toks []int
	if buf != nil && cap(*buf) > len(*buf) {
		*buf = append(*buf, tok)
		n := len(*buf)
		toks = (*buf)[n-1 : n : n]
	} else {
		toks = []int{tok}
	}
	s.out.Emits = append(s.out.Emits, Emit{Seq: r.seq, ID: r.id, Tokens: toks})
	if r.output() >= r.req.MaxTokens {
		s.finish(now, r, "length", nil)
	}
}

// StepDone applies the result of the batch planned by the last Ready: out[i] is the
// token sampled for Batch[i]. A non-nil err fails every request of the batch with
// gen.ErrInternal.
func (s *Scheduler) StepDone(now time.Time, out []int, err error) {
	batch := s.batch
	s.batch = nil
	if batch == nil {
		return
	}
	s.progress(now)
	if err == nil && len(out) != len(batch) {
		err = fmt.Errorf("backend returned %d tokens for a batch of %d", len(out), len(batch))
	}
	decode := false
	buf := make([]int, 0, len(batch))
	s.out.Emits = slices.Grow(s.out.Emits, len(batch))
	for i, r := range batch {
		r.inBatch = false
		if r.done {
			if r.aborted && s.cfg.Role == RolePrefill && s.cfg.Bug(BugPrefillAbortCacheLeak) {
				continue // PR #36926: the aborted result has no owner; nothing releases it
			}
			s.release(r)
			continue
		}
		if err != nil {
			s.finish(now, r, "", &gen.StageError{Stage: string(r.stage), Err: fmt.Errorf("scheduler: forward: %w: %v", gen.ErrInternal, err)})
			continue
		}
		if r.isDecode() {
			decode = true
		}
		if r.cached+r.inLen < len(r.tokens) { // a chunk of a chunked prefill: nothing sampled
			r.cached += r.inLen
			continue
		}
		r.cached, r.computed = len(r.tokens), true
		tok := out[i]
		if tok < 0 || tok >= s.cfg.VocabSize {
			s.finish(now, r, "", &gen.StageError{Stage: string(r.stage), Err: fmt.Errorf("scheduler: backend sampled token %d: %w", tok, gen.ErrInternal)})
			continue
		}
		if s.cfg.Role == RolePrefill {
			r.tokens = append(r.tokens, tok)
			s.generated++
			s.lastOutput = now
			s.moveTo(now, r, StageInflight, false)
			s.out.Sends = append(s.out.Sends, Send{Seq: r.seq, ID: r.id, Room: r.room, Pages: slices.Clone(r.pages),
				NumTokens: r.nPrompt, FirstToken: tok})
			continue
		}
		s.sampledInto(now, r, tok, &buf)
	}
	if decode {
		s.decodeSteps++
	}
	if !s.strict() && (s.cfg.Role != RoleDecode || s.cfg.DecodeLogInterval <= 1 ||
		(decode && s.decodeSteps%uint64(s.cfg.DecodeLogInterval) == 0)) {
		st := s.Stats()
		s.out.Stats = &st
	}
}
