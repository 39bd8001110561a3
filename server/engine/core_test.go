package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// coreHost is a hand-written Host that records what the Core asked of it, on a clock
// the test moves by hand.
type coreHost struct {
	now      time.Time
	gate     Gate
	up       bool          // Dial's answer
	cost     time.Duration // Dialled's answer per address down
	dials    int
	began    int
	ended    int
	receives []scheduler.Transfer
	tokens   map[uint64]int
	done     map[uint64]gen.Event
	pubs     int
}

func newCoreHost() *coreHost {
	return &coreHost{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), tokens: map[uint64]int{}, done: map[uint64]gen.Event{}}
}

func (h *coreHost) StartReceive(t scheduler.Transfer) { h.receives = append(h.receives, t) }
func (h *coreHost) StartSend(scheduler.Send)          {}
func (h *coreHost) Cancel(uint64)                     {}
func (h *coreHost) Dial(string) bool                  { h.dials++; return h.up }
func (h *coreHost) Dialled(down []string) time.Duration {
	return time.Duration(len(down)) * h.cost
}
func (h *coreHost) StepBegan(time.Time) Gate { h.began++; return h.gate }
func (h *coreHost) StepEnded()               { h.ended++ }
func (h *coreHost) Deliver(_ time.Time, rd *scheduler.Ready) {
	for _, em := range rd.Emits {
		h.tokens[em.Seq] += len(em.Tokens)
	}
	for _, f := range rd.Finished {
		h.done[f.Seq] = DoneEvent(f)
	}
}
func (h *coreHost) WantSnapshot(live, listed int) bool { return live != listed }
func (h *coreHost) Publish(time.Time, Publication)     { h.pubs++ }

func newTestCore(t *testing.T, fb *fakeBackend, cfg Config, h *coreHost) *Core {
	t.Helper()
	c, err := NewCore(fb, CoreConfig{Config: cfg, PageSize: fb.kv.PageSize, Pages: fb.kv.NumPages,
		Now: func() time.Time { return h.now }, SkipIdleTicks: true}, h)
	require.NoError(t, err)
	return c
}

// run advances c at the host's clock until it waits for time, and returns when.
func run(c *Core, h *coreHost) time.Time {
	for {
		if next := c.Advance(h.now); !next.Equal(h.now) {
			return next
		}
	}
}

func TestCoreStepsTakeTheirTime(t *testing.T) {
	fb := newFakeBackend(64, 4)
	fb.step = 10 * time.Millisecond
	h := newCoreHost()
	c := newTestCore(t, fb, DefaultConfig(), h)
	require.True(t, run(c, h).IsZero(), "an idle loop with nothing that can expire needs no tick")
	seq, err := c.Arrive(h.now, &gen.Request{ID: "a", Prompt: []int{0, 4, 5}, MaxTokens: 3, IgnoreEOS: true})
	require.NoError(t, err)
	start := h.now
	next := run(c, h)
	require.Equal(t, start.Add(fb.step), next, "the first step runs and takes its step time")
	require.True(t, c.Computing())
	require.False(t, c.Settled())
	h.now = start.Add(fb.step / 2)
	require.Equal(t, next, run(c, h), "mid-step, the loop waits for the step's end")
	require.Equal(t, 1, fb.steps)
	steps := 1
	for !next.IsZero() {
		h.now = next
		next = run(c, h)
		steps = fb.steps
	}
	require.Equal(t, 3, steps, "one step per token")
	require.Equal(t, 3, h.tokens[seq])
	require.True(t, h.done[seq].Done)
	require.NoError(t, h.done[seq].Err)
	require.Equal(t, h.began, h.ended)
	require.True(t, c.Settled())
	require.Equal(t, start.Add(3*fb.step), h.now, "the request took exactly its three step times")
	require.Empty(t, c.Published().Snap, "the last list published is empty once nothing is live")
}

func TestCoreHeldStepServesUntilReleased(t *testing.T) {
	tests := []struct {
		name    string
		release error
	}{
		{"released, the step runs", nil},
		{"failed, the batch fails", StepFailpointError("boom")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBackend(64, 4)
			h := newCoreHost()
			h.gate = Gate{Hold: true}
			c := newTestCore(t, fb, DefaultConfig(), h)
			seq, err := c.Arrive(h.now, &gen.Request{ID: "h", Prompt: []int{0, 4}, MaxTokens: 1, IgnoreEOS: true})
			require.NoError(t, err)
			next := run(c, h)
			require.Equal(t, h.now.Add(DefaultTickInterval), next, "a held step serves every tick")
			pubs := h.pubs
			h.now = next
			require.Equal(t, h.now.Add(DefaultTickInterval), run(c, h))
			require.Greater(t, h.pubs, pubs, "the held loop still iterates (timeouts, gauges)")
			require.Zero(t, fb.steps, "nothing computes while held")
			require.False(t, c.Settled())
			h.gate = Gate{}
			c.Release(tc.release)
			run(c, h)
			require.Equal(t, h.began, h.ended)
			if tc.release != nil {
				require.Zero(t, fb.steps)
				require.ErrorContains(t, h.done[seq].Err, "boom")
				return
			}
			require.Equal(t, 1, fb.steps)
			require.True(t, h.done[seq].Done)
			require.NoError(t, h.done[seq].Err)
		})
	}
}

func TestCoreHeldSleepEndsByItself(t *testing.T) {
	fb := newFakeBackend(64, 4)
	h := newCoreHost()
	h.gate = Gate{Hold: true, Sleep: 30 * time.Millisecond}
	c := newTestCore(t, fb, DefaultConfig(), h)
	_, err := c.Arrive(h.now, &gen.Request{ID: "s", Prompt: []int{0, 4}, MaxTokens: 1, IgnoreEOS: true})
	require.NoError(t, err)
	end := h.now.Add(h.gate.Sleep)
	next := run(c, h)
	h.gate = Gate{}
	for next.Before(end) {
		require.Zero(t, fb.steps)
		h.now = next
		next = run(c, h)
	}
	require.Equal(t, end, next, "the sleep's end is a wake-up of its own")
	h.now = next
	run(c, h)
	require.Equal(t, 1, fb.steps)
}

func TestCoreBootstrapDialsBlockTheLoop(t *testing.T) {
	fb := newFakeBackend(64, 4)
	h := newCoreHost()
	h.cost = RefusedBootstrapCost
	cfg := DefaultConfig()
	cfg.Role, cfg.Semantics, cfg.SGLangBugs = RoleDecode, SemanticsSGLang, scheduler.BugSet{scheduler.BugBootstrapRetryEveryStep}
	cfg.ReservedDecodeTokens = 0
	c := newTestCore(t, fb, cfg, h)
	_, err := c.Arrive(h.now, &gen.Request{ID: "d", Prompt: []int{0, 4, 5}, MaxTokens: 2,
		Bootstrap: &gen.Bootstrap{Room: 7, Addr: "prefill-0"}})
	require.NoError(t, err)
	run(c, h) // the transfer is planned, and waits for its bootstrap server
	require.Empty(t, h.receives)
	start := h.now
	next := run(c, h)
	require.Equal(t, 1, h.dials)
	require.True(t, c.Blocked())
	require.Equal(t, start.Add(RefusedBootstrapCost), next, "a round of refused dials holds the loop")
	h.now = next.Add(-time.Millisecond)
	require.Equal(t, next, run(c, h), "blocked until the round ends")
	h.now = next
	run(c, h)
	require.False(t, c.Blocked())
	require.Equal(t, 1, h.dials, "the iteration after a round does not dial again")
	h.up = true
	run(c, h)
	require.Equal(t, 2, h.dials)
	require.Len(t, h.receives, 1, "a server that answers starts its transfer")
	require.Equal(t, uint64(7), h.receives[0].Room)
}

func TestCoreStopEndsTheStepAndFailsEveryRequest(t *testing.T) {
	fb := newFakeBackend(64, 4)
	fb.step = time.Second
	h := newCoreHost()
	c := newTestCore(t, fb, DefaultConfig(), h)
	seq, err := c.Arrive(h.now, &gen.Request{ID: "x", Prompt: []int{0, 4}, MaxTokens: 5, IgnoreEOS: true})
	require.NoError(t, err)
	run(c, h)
	require.True(t, c.Computing())
	n := c.Stop(h.now, nil, gen.ErrAborted)
	require.Equal(t, 1, n)
	require.True(t, errors.Is(h.done[seq].Err, gen.ErrAborted))
	require.True(t, c.Settled())
	require.Equal(t, h.began, h.ended)
}
