package phases

import (
	"time"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
)

// What the steps of End write, the same in either driver.

// CheckLeaks is the leak_check event: the leak check (LeakCheck) from now, or, after
// an interrupt, none (the user wants out: no waiting for gauges; not evaluated).
func CheckLeaks(clk Clock, interrupted bool, procs []string, read ReadAll, bound, poll time.Duration) ledger.Event {
	started := clk.Now() // lets reports judge a merged run: was another shard still sending?
	v := judge.LeakVerdict{Detail: judge.LeakInterrupted}
	if !interrupted {
		v = LeakCheck(clk, procs, read, bound, poll)
	}
	return judge.LeakCheckEvent(started, v)
}

// FaultsFailed says whether the fault timeline's error err makes the run invalid
// (the driver wraps it with judge.ErrInfrastructure), and the log event that says so:
// not when there is none, nor after an interrupt, which cuts fault steps short.
func FaultsFailed(err error, interrupted bool) (ledger.Event, bool) {
	if err == nil || interrupted {
		return ledger.Event{}, false
	}
	return ledger.Event{Type: ledger.EventLog, Message: "fault timeline failed: " + err.Error()}, true
}

// RunEndEvent is the run's last event: the run's error, if any, and why it was
// interrupted, if it was.
func RunEndEvent(err, interrupted error) ledger.Event {
	ev := ledger.Event{Type: ledger.EventRunEnd}
	if err != nil {
		ev.Error = err.Error()
	}
	if interrupted != nil {
		ev.Interrupted = interrupted.Error()
	}
	return ev
}

// InterruptedEvent is the log line a run writes once its end is done when it was
// interrupted (cause: why).
func InterruptedEvent(cause error) ledger.Event {
	return ledger.Event{Type: ledger.EventLog, Message: "run interrupted: " + cause.Error()}
}
