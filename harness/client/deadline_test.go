package client

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// TestDeadlinesDue: the timer's decision, the earliest deadline still live in the
// request's phase (the connect bound ends with the write, first_token with the first
// token, stall runs from the head or the last chunk).
func TestDeadlinesDue(t *testing.T) {
	all := Deadlines{Connect: 2 * time.Second, FirstToken: 5 * time.Second, Stall: 3 * time.Second, Total: 10 * time.Second}
	for _, tc := range []struct {
		name      string
		dl        Deadlines
		stream    bool
		phase     int32
		stallFrom time.Duration // -1: the stall bound not armed
		want      string
		at        time.Duration
	}{
		{name: "connecting: connect", dl: all, stream: true, phase: phConnect, stallFrom: -1, want: "connect", at: 2 * time.Second},
		{name: "written: first token", dl: all, stream: true, phase: phBeforeHeaders, stallFrom: -1, want: "first_token", at: 5 * time.Second},
		{name: "head at 1s: stall", dl: all, stream: true, phase: phBeforeFirstToken, stallFrom: time.Second, want: "stall", at: 4 * time.Second},
		{name: "chunk at 4s: first token before stall", dl: all, stream: true, phase: phBeforeFirstToken, stallFrom: 4 * time.Second, want: "first_token", at: 5 * time.Second},
		{name: "mid-stream, chunk at 6s: stall", dl: all, stream: true, phase: phMidStream, stallFrom: 6 * time.Second, want: "stall", at: 9 * time.Second},
		{name: "mid-stream, chunk at 8s: total", dl: all, stream: true, phase: phMidStream, stallFrom: 8 * time.Second, want: "total", at: 10 * time.Second},
		{name: "not a stream: no first token bound", dl: all, phase: phBeforeHeaders, stallFrom: -1, want: "total", at: 10 * time.Second},
		{name: "a tie goes to total", dl: Deadlines{Connect: time.Second, Total: time.Second}, phase: phConnect, stallFrom: -1, want: "total", at: time.Second},
		{name: "no bounds", stream: true, phase: phConnect, stallFrom: -1},
		{name: "stall armed without a bound", dl: Deadlines{Connect: time.Second}, stream: true, phase: phMidStream, stallFrom: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ph atomic.Int32
			ph.Store(tc.phase)
			d := &deadlines{dl: tc.dl, stream: tc.stream, phase: &ph}
			d.stallFrom.Store(int64(tc.stallFrom))
			name, at, ok := d.due()
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, name)
			assert.Equal(t, tc.at, at)
		})
	}
}

// TestStallArmedAfterTimerWentOffIdle: a stream's head that arrives after the timer went
// off with no deadline live (the connect bound over, no first-token or total bound)
// still starts the stall bound. The timer's offset then lies in the past, so "earlier
// than the timer" was never true of the stall bound, and a silent stream was held forever.
func TestStallArmedAfterTimerWentOffIdle(t *testing.T) {
	var ph atomic.Int32
	fired := make(chan string, 4)
	var d deadlines
	const connect = time.Second
	d.arm(Deadlines{Connect: connect, Stall: 50 * time.Millisecond}, true, &ph, func(_ error, name string) { fired <- name })
	defer d.stop()
	ph.Store(phBeforeHeaders) // written: the connect bound is over
	// The timer goes off at the connect bound and finds nothing live.
	require.Eventually(t, func() bool { return time.Since(d.start) > 2*connect }, time.Minute, 10*time.Millisecond)
	ph.Store(phBeforeFirstToken)
	d.armStall()
	select {
	case name := <-fired:
		require.Equal(t, "stall", name)
	case <-time.After(10 * time.Second):
		t.Fatal("the stall bound never fired")
	}
}

// TestDeadlineAfterJudgementDoesNothing: a deadline that goes off once the result is
// judged (the request answered at its deadline, before Do's deferred calls) neither
// inspects the server nor cancels: the answer was in time. The timer is stood in for by
// calling what it calls, between the judgement and the end of Do.
func TestDeadlineAfterJudgementDoesNothing(t *testing.T) {
	c := &Client{now: time.Now, inspectGrace: time.Minute}
	cancelled := false
	st := &reqState{cancel: func(error) { cancelled = true }}
	res := c.judge(&Result{}, st, Facts{Headers: true, Status: 200, End: EndClean, Done: true, Finished: true}, nil)
	require.Equal(t, ledger.OutcomeOK, res.Outcome, res.Err)
	obs := &inspectObs{held: func() bool { return true }}
	c.fire(&Request{ID: "j"}, st, obs)(ErrTotalDeadline, "total")
	st.waitFired(c.inspectGrace)
	assert.Empty(t, obs.calls, "a request judged ok was inspected as overdue")
	assert.False(t, cancelled)
}
