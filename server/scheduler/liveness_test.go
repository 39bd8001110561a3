package scheduler

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestStrictLiveness: when the other side of every transfer answers promptly and steps
// always run, strict semantics finish every admitted request successfully, even with a
// pool so small that requests are retracted again and again (no deadlock between the
// waiting queue, retraction and preallocation).
func TestStrictLiveness(t *testing.T) { testLiveness(t, SemanticsStrict) }

// TestSGLangLivenessWhenEverythingFits: SGLang semantics also finish everything when no
// request is larger than the pool (no reservation headroom): its wedges need a head
// that does not fit.
func TestSGLangLivenessWhenEverythingFits(t *testing.T) { testLiveness(t, SemanticsSGLang) }

func testLiveness(t *testing.T, sem Semantics) {
	for _, role := range []Role{RoleColocated, RolePrefill, RoleDecode} {
		retracted := 0
		for seed := range uint64(6) {
			retracted += liveness(t, role, sem, seed)
		}
		if role != RolePrefill && retracted == 0 {
			t.Errorf("%s: the pool never ran out; the test does not exercise retraction", role)
		}
		t.Logf("%s: %d retractions", role, retracted)
	}
}

func liveness(t *testing.T, role Role, sem Semantics, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 11))
	c := testConfig()
	c.Role, c.Semantics = role, sem
	c.Pages, c.PageSize, c.MaxRunningRequests = 10, 2, 4
	c.WaitingTimeout, c.TransferTimeout, c.BootstrapTimeout, c.PreallocTimeout = time.Hour, time.Hour, time.Hour, time.Hour
	c.WatchdogTimeout = time.Minute
	if seed%2 == 1 {
		c.ChunkedPrefillSize, c.MaxPrefillTokens = 3, 5
	}
	s := mustNew(t, c)
	now := t0
	admitted, finished, retracted := 0, 0, 0
	room := uint64(0)
	for range 40 {
		room++
		r := req("l", 1+rng.IntN(7), 1+rng.IntN(10), room)
		r.IgnoreEOS = true
		if _, err := s.Arrive(now, r); err != nil {
			t.Fatalf("%s/%d: %v", role, seed, err)
		}
		admitted++
		if role == RolePrefill {
			s.Registered(now, room)
		}
	}
	for iter := 0; iter < 20000 && finished < admitted; iter++ {
		now = now.Add(10 * time.Millisecond)
		s.Tick(now)
		rd := s.Ready(now)
		retracted += len(rd.Retracted)
		for _, f := range rd.Finished {
			if f.Err != nil {
				t.Fatalf("%s/%d: request %d failed: %v", role, seed, f.Seq, f.Err)
			}
			finished++
		}
		for _, tr := range rd.Transfers {
			s.Received(now, tr.Room, 2+rng.IntN(50), nil)
		}
		for _, snd := range rd.Sends {
			s.Sent(now, snd.Room, nil)
		}
		if rd.Batch != nil {
			out := make([]int, len(rd.Batch))
			for i := range out {
				out[i] = 2 + rng.IntN(50)
			}
			s.StepDone(now, out, nil)
		}
		checkPool(t, s)
	}
	rd := s.Ready(now)
	finished += len(rd.Finished)
	if finished != admitted || s.Live() != 0 || s.pool.UsedPages() != 0 {
		t.Fatalf("%s/%d: %d of %d finished, live %d, pages %d, stats %+v", role, seed, finished, admitted, s.Live(), s.pool.UsedPages(), s.Stats())
	}
	return retracted
}
