package phases

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
)

func TestCheckLeaks(t *testing.T) {
	clk := newStepClock()
	g := &gauges{script: []float64{1, 0}, clk: clk}
	ev := CheckLeaks(clk, false, []string{"decode-0"}, g.read, 10*time.Second, time.Second)
	if assert.NotNil(t, ev.Passed) {
		assert.True(t, *ev.Passed, ev.Detail)
	}
	assert.Equal(t, &clk.t0, ev.Started, "started when the check began")
	assert.Len(t, g.reads, 2)

	g = &gauges{script: []float64{1}, clk: clk}
	ev = CheckLeaks(clk, true, []string{"decode-0"}, g.read, 10*time.Second, time.Second)
	assert.Equal(t, judge.LeakCheckEvent(clk.Now(), judge.LeakVerdict{Detail: judge.LeakInterrupted}), ev)
	assert.Empty(t, g.reads, "interrupted: no waiting for gauges")
}

func TestFaultsFailed(t *testing.T) {
	err := errors.New("chaos: proxy refused")
	ev, bad := FaultsFailed(err, false)
	assert.True(t, bad)
	assert.Equal(t, ledger.Event{Type: ledger.EventLog, Message: "fault timeline failed: chaos: proxy refused"}, ev)
	_, bad = FaultsFailed(err, true)
	assert.False(t, bad, "an interrupt cuts fault steps short")
	_, bad = FaultsFailed(nil, false)
	assert.False(t, bad)
}

func TestRunEndEvent(t *testing.T) {
	assert.Equal(t, ledger.Event{Type: ledger.EventRunEnd}, RunEndEvent(nil, nil))
	assert.Equal(t, ledger.Event{Type: ledger.EventRunEnd, Error: "x", Interrupted: "context canceled"},
		RunEndEvent(errors.New("x"), errors.New("context canceled")))
	assert.Equal(t, "run interrupted: context canceled", InterruptedEvent(errors.New("context canceled")).Message)
}
