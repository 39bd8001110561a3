package workload

import (
	"fmt"
	"time"

	"pdsoak/ledger"
)

// Back-off of an agent whose connection was refused or cut: a dead or restarting
// target must not burn the session's turns in a second (each would be one more
// transport error and one turn less of load after it comes back). The agent re-sends
// the same turn after MinReconnectWait, doubling up to MaxReconnectWait, until it gets
// an answer or its window ends, so the run lasts its duration and recovery, or its
// absence, is measured.
const (
	MinReconnectWait = 250 * time.Millisecond
	MaxReconnectWait = 4 * time.Second
)

// LostConnection reports whether o says the connection failed rather than the server
// answering: refused or reset before any response, or lost mid-response.
func LostConnection(o ledger.Outcome) bool {
	return o == ledger.OutcomeTransportError || o == ledger.OutcomeConnectionLost
}

// ReconnectWait is the wait before the attempt-th re-send (1-based) after a lost
// connection.
func ReconnectWait(attempt int) time.Duration {
	d := MinReconnectWait
	for i := 1; i < attempt && d < MaxReconnectWait; i++ {
		d *= 2
	}
	return min(d, MaxReconnectWait)
}

// ReconnectID is the request id of the attempt-th re-send of a turn after a lost
// connection.
func ReconnectID(id string, attempt int) string { return fmt.Sprintf("%s-x%d", id, attempt) }

// Reconnects is the back-off of one turn after lost connections, stepped by Session
// (the real agents and the simulated ones), so both re-send the same ids after the
// same waits. The zero value is a turn with no re-send yet.
type Reconnects struct{ sent int }

// After decides what follows a result with outcome o of the turn with id: a re-send
// under rid after wait (again), or nothing (the result is the turn's answer). Only a
// lost connection calls for a re-send; anything else, a refusal of a re-send included,
// ends the back-off.
func (r *Reconnects) After(id string, o ledger.Outcome) (wait time.Duration, rid string, again bool) {
	if !LostConnection(o) {
		return 0, "", false
	}
	r.sent++
	return ReconnectWait(r.sent), ReconnectID(id, r.sent), true
}

// Active reports whether the turn is backing off: a re-send was decided, so its result
// is judged by After alone (a refused re-send is not retried as a first refusal is).
func (r *Reconnects) Active() bool { return r.sent > 0 }
