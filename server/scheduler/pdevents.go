package scheduler

import (
	"fmt"
	"time"

	"pdsoak/server/gen"
)

// Events of the PD legs: decode registered a room, KV arrived, KV reached decode.

// Registered (prefill): decode registered room. The leg may not have arrived yet.
func (s *Scheduler) Registered(now time.Time, room uint64) {
	s.touch(now)
	r, ok := s.rooms[room]
	if !ok {
		s.regs[room] = now
		return
	}
	if r.stage == StageBootstrap {
		s.moveTo(now, r, StageWaiting, false)
		s.progress(now)
	}
}

// Received (decode): the KV of room arrived (err nil) with the first token prefill
// sampled, or the transfer failed. It reports whether a request was waiting for it.
func (s *Scheduler) Received(now time.Time, room uint64, firstToken int, err error) bool {
	r, ok := s.rooms[room]
	if !ok || r.stage != StageTransfer || s.cfg.Role != RoleDecode {
		return false
	}
	s.progress(now)
	if err != nil && s.cfg.Bug(BugAbortedPrefillGarbage) {
		// sglang#30233: prefill aborted the request, yet decode carries on as if its KV
		// had arrived, from whatever its pages hold, with the prompt's last token as the
		// "first token" prefill never sampled.
		firstToken, err = r.tokens[r.nPrompt-1], nil
	}
	if err == nil && (firstToken < 0 || firstToken >= s.cfg.VocabSize) {
		err = fmt.Errorf("first token %d outside the vocabulary", firstToken)
	}
	if err != nil {
		s.finish(now, r, "", &gen.StageError{Stage: string(StageTransfer),
			Err: fmt.Errorf("scheduler: room %d: %w: %v", room, gen.ErrTransfer, err)})
		return true
	}
	r.cached, r.computed = r.nPrompt, true
	s.moveTo(now, r, StageWaiting, false)
	s.sampled(now, r, firstToken)
	return true
}

// Sent (prefill): the KV of room reached decode (err nil) or the send failed. An error
// for a request not yet sending (decode abandoned the room) ends it too.
func (s *Scheduler) Sent(now time.Time, room uint64, err error) bool {
	r, ok := s.rooms[room]
	if !ok || s.cfg.Role != RolePrefill {
		return false
	}
	if r.stage != StageInflight {
		// Decode gave the room up before prefill sent anything (abort, timeout): stop
		// working on it now instead of computing KV nobody will take (I6).
		if err == nil || r.stage == StageTransfer {
			return false
		}
		s.finish(now, r, "", &gen.StageError{Stage: string(r.stage),
			Err: fmt.Errorf("scheduler: room %d: %w: %v", room, gen.ErrTransfer, err)})
		return true
	}
	s.progress(now)
	if err != nil {
		s.finish(now, r, "", &gen.StageError{Stage: string(StageTransfer),
			Err: fmt.Errorf("scheduler: room %d: %w: %v", room, gen.ErrTransfer, err)})
		return true
	}
	reason := "length"
	if r.output() > 0 && r.tokens[len(r.tokens)-1] == s.cfg.EOS && !r.req.IgnoreEOS {
		reason = "stop"
	}
	s.finish(now, r, reason, nil)
	return true
}
