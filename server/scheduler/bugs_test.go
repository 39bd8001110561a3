package scheduler

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

func TestBugSetValidation(t *testing.T) {
	tests := []struct {
		name    string
		sem     Semantics
		bugs    BugSet
		wantErr string
	}{
		{"no bug, strict", SemanticsStrict, nil, ""},
		{"worker bug, sglang", SemanticsSGLang, BugSet{BugDecodeOOMRequeue, BugAbortMissesQueues}, ""},
		{"bug needs sglang", SemanticsStrict, BugSet{BugDecodeOOMRequeue}, "--sglang-bug needs --semantics sglang"},
		{"unknown bug", SemanticsSGLang, BugSet{"no-such-bug"}, `"no-such-bug" is unknown`},
		{"router bug on a worker", SemanticsSGLang, BugSet{BugPrefillFailNoDecodeAbort}, "is a router bug"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := DefaultLimits()
			l.PageSize, l.Semantics, l.SGLangBugs = 16, tc.sem, tc.bugs
			err := l.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestBugSetFlag(t *testing.T) {
	var s BugSet
	require.NoError(t, s.Set("decode-oom-requeue, abort-misses-queues"))
	require.NoError(t, s.Set("decode-oom-requeue")) // repeated: kept once
	assert.Equal(t, "decode-oom-requeue,abort-misses-queues", s.String())
	require.ErrorContains(t, s.Set("decode-oom"), "is unknown")
	for _, b := range Bugs {
		info, err := LookupBug(string(b.Name))
		require.NoError(t, err)
		assert.NotEmpty(t, info.Upstream, "%s has no upstream reference", b.Name)
	}
}

// bugConfig is testConfig for role in SGLang semantics with bugs on.
func bugConfig(role Role, bugs ...Bug) Config {
	c := testConfig()
	c.Role, c.Semantics, c.SGLangBugs, c.ReservedDecodeTokens = role, SemanticsSGLang, bugs, 0
	return c
}

// run plans and completes steps, sampling token 7 (never EOS), until no batch is planned
// or steps run out; it returns the last Ready.
func run(s *Scheduler, steps int) Ready {
	var rd Ready
	for range steps {
		rd = s.Ready(t0)
		if rd.Batch == nil {
			return rd
		}
		out := make([]int, len(rd.Batch))
		for i := range out {
			out[i] = 7
		}
		s.StepDone(t0, out, nil)
	}
	return rd
}

// stageOf is the stage /debug/requests shows for id ("" when not live).
func stageOf(s *Scheduler, id string) string {
	for _, ri := range s.Requests(t0) {
		if ri.ID == id {
			return ri.Stage
		}
	}
	return ""
}

// TestDecodeOOMRequeue: two decodes outgrow a 16-page pool; the retracted one returns
// to prealloc under the bug and stays there, or waits in the retracted queue and
// finishes without it.
func TestDecodeOOMRequeue(t *testing.T) {
	for _, bug := range []bool{true, false} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			var bugs []Bug
			if bug {
				bugs = append(bugs, BugDecodeOOMRequeue)
			}
			s := mustNew(t, bugConfig(RoleDecode, bugs...))
			for i, id := range []string{"a", "b"} {
				_, err := s.Arrive(t0, req(id, 4, 40, uint64(i+1)))
				require.NoError(t, err)
			}
			rd := s.Ready(t0)
			require.Len(t, rd.Transfers, 2)
			for _, tr := range rd.Transfers {
				require.True(t, s.Received(t0, tr.Room, 7, nil))
			}
			run(s, 200)
			if bug {
				assert.Equal(t, string(StagePrealloc), stageOf(s, "b"), "the retracted request stays in prealloc")
				assert.Equal(t, 1, s.Live())
			} else {
				assert.Zero(t, s.Live(), "both finish: %v", s.Requests(t0))
			}
		})
	}
}

// TestAbortMissesQueues: an abort of a decode request in transfer is ignored under the
// bug (it keeps its pages), honoured without it.
func TestAbortMissesQueues(t *testing.T) {
	for _, bug := range []bool{true, false} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			var bugs []Bug
			if bug {
				bugs = append(bugs, BugAbortMissesQueues)
			}
			s := mustNew(t, bugConfig(RoleDecode, bugs...))
			seq, err := s.Arrive(t0, req("a", 4, 4, 1))
			require.NoError(t, err)
			s.Ready(t0)
			require.True(t, s.Abort(t0, seq, fmt.Errorf("client went away: %w", gen.ErrAborted)))
			s.Ready(t0)
			if bug {
				assert.Equal(t, string(StageTransfer), stageOf(s, "a"))
				assert.Positive(t, s.Stats().UsedPages)
			} else {
				assert.Zero(t, s.Live())
				assert.Zero(t, s.Stats().UsedPages)
			}
		})
	}
}

// TestAbortStormOrphans: an aborted prefill request in bootstrap ends for its client
// but stays counted in the bootstrap queue under the bug, and no bound ever ends it.
func TestAbortStormOrphans(t *testing.T) {
	for _, bug := range []bool{true, false} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			var bugs []Bug
			if bug {
				bugs = append(bugs, BugAbortStormOrphans)
			}
			c := bugConfig(RolePrefill, bugs...)
			c.BootstrapTimeout = 1
			s := mustNew(t, c)
			seq, err := s.Arrive(t0, req("a", 4, 4, 1))
			require.NoError(t, err)
			require.True(t, s.Abort(t0, seq, nil))
			rd := s.Ready(t0)
			require.Len(t, rd.Finished, 1, "the client gets its answer either way")
			s.Tick(t0.Add(1e9))
			assert.Empty(t, s.Ready(t0).Finished, "finished once")
			assert.Zero(t, s.Live())
			want := 0
			if bug {
				want = 1
			}
			assert.Equal(t, want, s.Stats().Bootstrap)
		})
	}
}

// TestAbortedPrefillGarbage: a failed transfer fails the decode request, or under the
// bug lets it run as if the KV had arrived.
func TestAbortedPrefillGarbage(t *testing.T) {
	for _, bug := range []bool{true, false} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			var bugs []Bug
			if bug {
				bugs = append(bugs, BugAbortedPrefillGarbage)
			}
			s := mustNew(t, bugConfig(RoleDecode, bugs...))
			_, err := s.Arrive(t0, req("a", 4, 3, 1))
			require.NoError(t, err)
			s.Ready(t0)
			require.True(t, s.Received(t0, 1, 0, fmt.Errorf("prefill aborted the room")))
			rd := s.Ready(t0)
			if !bug {
				require.Len(t, rd.Finished, 1)
				require.ErrorIs(t, rd.Finished[0].Err, gen.ErrTransfer)
				return
			}
			require.Empty(t, rd.Finished)
			require.Len(t, rd.Emits, 1, "the prompt's last token, as if prefill had sampled it")
			assert.Equal(t, []int{13}, rd.Emits[0].Tokens)
		})
	}
}

// FuzzBugSetSet: whatever --sglang-bug is given, Set either refuses it or leaves a set
// of known bugs without repeats, which String lists back.
func FuzzBugSetSet(f *testing.F) {
	for _, s := range []string{"decode-oom-requeue", "a,b", ",,", "abort-misses-queues, abort-storm-orphans", "decode-oom-requeue,decode-oom-requeue"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var s BugSet
		if err := s.Set(v); err != nil {
			return
		}
		seen := map[Bug]bool{}
		for _, b := range s {
			_, err := LookupBug(string(b))
			require.NoError(t, err)
			require.False(t, seen[b], "%s twice", b)
			seen[b] = true
		}
		var back BugSet
		require.NoError(t, back.Set(s.String()))
		require.Equal(t, s, back)
	})
}
