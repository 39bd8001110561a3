package scheduler

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustNew(t testing.TB, c Config) *Scheduler {
	t.Helper()
	s, err := New(c)
	require.NoError(t, err)
	return s
}

func req(id string, prompt, max int, room uint64) *gen.Request {
	r := &gen.Request{ID: id, MaxTokens: max}
	for i := range prompt {
		r.Prompt = append(r.Prompt, 10+i%100)
	}
	if room > 0 {
		r.Bootstrap = &gen.Bootstrap{Room: room, Addr: "127.0.0.1:1"}
	}
	return r
}

func TestQueueLimitBySemantics(t *testing.T) {
	tests := []struct {
		name      string
		role      Role
		semantics Semantics
		refused   bool
	}{
		{"strict colocated", RoleColocated, SemanticsStrict, true},
		{"strict prefill", RolePrefill, SemanticsStrict, true},
		{"strict decode", RoleDecode, SemanticsStrict, true},
		{"sglang colocated", RoleColocated, SemanticsSGLang, true},
		{"sglang prefill ignores the limit", RolePrefill, SemanticsSGLang, false},
		{"sglang decode ignores the limit", RoleDecode, SemanticsSGLang, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			c.Role, c.Semantics, c.MaxQueuedRequests = tc.role, tc.semantics, 2
			s := mustNew(t, c)
			var last error
			for i := range 5 {
				_, last = s.Arrive(t0, req("r", 4, 2, uint64(i+1)))
			}
			var oe *gen.OverloadError
			if got := errors.As(last, &oe); got != tc.refused {
				t.Fatalf("fifth arrival: err=%v, want refused=%v", last, tc.refused)
			}
			if tc.refused && (oe.RetryAfter != time.Second || !errors.Is(last, gen.ErrOverloaded)) {
				t.Fatalf("overload error %v lacks Retry-After or the sentinel", last)
			}
		})
	}
}

// TestRandomWalk drives each role through random events and checks after every one that
// the pool and the queues agree and no page is owned twice; at the end every request
// resolves and every page is back.
func TestRandomWalk(t *testing.T) {
	for _, role := range []Role{RoleColocated, RolePrefill, RoleDecode} {
		for _, sem := range []Semantics{SemanticsStrict, SemanticsSGLang} {
			for seed := range uint64(8) {
				randomWalk(t, role, sem, seed)
			}
		}
	}
}

func randomWalk(t *testing.T, role Role, sem Semantics, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := testConfig()
	c.Role, c.Semantics = role, sem
	c.Pages, c.PageSize, c.MaxRunningRequests, c.MaxQueuedRequests = 12, 2, 3, 6
	c.WaitingTimeout, c.TransferTimeout, c.BootstrapTimeout, c.PreallocTimeout = 20*time.Second, 20*time.Second, 20*time.Second, 20*time.Second
	c.RequestTimeout, c.WatchdogTimeout = 60*time.Second, 15*time.Second
	s := mustNew(t, c)
	now := t0
	resolved := map[uint64]bool{}
	admitted := map[uint64]bool{}
	var rooms []uint64
	nextRoom := uint64(1)
	var out []int
	collect := func() {
		rd := s.Ready(now)
		for _, f := range rd.Finished {
			if resolved[f.Seq] {
				t.Fatalf("%s/%s/%d: request %d finished twice", role, sem, seed, f.Seq)
			}
			resolved[f.Seq] = true
		}
		out = make([]int, len(rd.Batch))
		for i := range out {
			out[i] = 2 + rng.IntN(20) // EOS is 1: never sampled here
			if rng.IntN(10) == 0 {
				out[i] = 1
			}
		}
		checkPool(t, s)
	}
	for range 400 {
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		switch rng.IntN(8) {
		case 0, 1:
			r := req("x", 1+rng.IntN(8), 1+rng.IntN(8), nextRoom)
			seq, err := s.Arrive(now, r)
			if err == nil {
				admitted[seq] = true
				rooms = append(rooms, nextRoom)
			}
			nextRoom++
		case 2:
			if s.BatchInFlight() {
				s.StepDone(now, out, nil)
			}
		case 3:
			if len(rooms) > 0 {
				room := rooms[rng.IntN(len(rooms))]
				switch role {
				case RolePrefill:
					s.Registered(now, room)
					if rng.IntN(2) == 0 {
						s.Sent(now, room, nil)
					}
				case RoleDecode:
					var err error
					if rng.IntN(5) == 0 {
						err = errors.New("crc mismatch")
					}
					s.Received(now, room, 5, err)
				}
			}
		case 4:
			if len(admitted) > 0 && rng.IntN(3) == 0 {
				for seq := range admitted {
					s.Abort(now, seq, nil)
					break
				}
			}
		default:
			s.Tick(now)
		}
		collect()
	}
	// Drain: finish the batch, let every bound expire.
	if s.BatchInFlight() {
		s.StepDone(now, out, nil)
	}
	s.AbortAll(now, errors.New("drain"))
	collect()
	if s.BatchInFlight() {
		s.StepDone(now, out, nil)
		collect()
	}
	if s.Live() != 0 || s.pool.UsedPages() != 0 {
		t.Fatalf("%s/%s/%d: after drain live=%d used pages=%d", role, sem, seed, s.Live(), s.pool.UsedPages())
	}
	for seq := range admitted {
		if !resolved[seq] {
			t.Fatalf("%s/%s/%d: request %d never resolved", role, sem, seed, seq)
		}
	}
}

// BenchmarkStep256 measures one scheduler step (Ready + StepDone) with 256 running
// requests decoding, against the cost of planning alone as a baseline.
func BenchmarkStep256(b *testing.B) {
	c := testConfig()
	c.Pages, c.PageSize, c.MaxRunningRequests, c.ContextLength, c.MaxPrefillTokens = 256*80, 16, 256, 1<<20, 1<<20
	s := mustNew(b, c)
	now := t0
	arrive := func(n int) {
		for i := range n {
			r := req("r", 64, 1024, 0)
			r.IgnoreEOS = true
			if _, err := s.Arrive(now, r); err != nil {
				b.Fatal(i, err)
			}
		}
	}
	arrive(256)
	out := make([]int, 256)
	for i := range out {
		out[i] = 7
	}
	rd := s.Ready(now)
	s.StepDone(now, out, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Tick(now)
		rd = s.Ready(now)
		if len(rd.Batch) != 256 {
			b.Fatalf("batch of %d", len(rd.Batch))
		}
		s.StepDone(now, out, nil)
		if s.Live() < 256 {
			arrive(256 - s.Live())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/req")
	b.StopTimer()
	// Baseline in the same run: one tinyref decode step over the same 256 requests.
	fwd := forward256(b)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(fwd.Nanoseconds()), "step/forward")
}

// forward256 times one tinyref decode step of 256 sequences of 16 cached tokens.
func forward256(b *testing.B) time.Duration {
	kc := kernels.DefaultConfig()
	kc.NumPages = 256 * 2
	be, err := kernels.New(kc)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]kernels.SeqInput, 256)
	for i := range batch {
		toks := make([]int, 16)
		for j := range toks {
			toks[j] = 32 + (i+j)%90
		}
		batch[i] = kernels.SeqInput{Tokens: toks, Pages: []int32{int32(2 * i), int32(2*i + 1)}, Sample: true}
	}
	out := make([]int, 256)
	if err := be.Forward(batch, out); err != nil { // prefill
		b.Fatal(err)
	}
	for i := range batch {
		batch[i].Pos, batch[i].Tokens = 16, []int{out[i]}
	}
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		if err := be.Forward(batch, out); err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(start))
		for i := range batch {
			batch[i].Pos++
			batch[i].Tokens = []int{out[i]}
		}
	}
	return best
}
