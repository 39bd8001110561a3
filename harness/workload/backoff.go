package workload

import (
	"context"
	"fmt"
	"time"

	"pdsoak/harness/client"
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

// lostConnection reports whether o says the connection failed rather than the server
// answering: refused or reset before any response, or lost mid-response.
func lostConnection(o ledger.Outcome) bool {
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

// reconnect re-sends a turn whose connection was lost, backing off, until an answer
// comes or ctx (the window) ends. It returns the last result, the re-sends it made and
// false when ctx ended the session.
func (a *Agents) reconnect(ctx context.Context, res *client.Result, id string, session, turn int, conv []client.Message, s Sender) (*client.Result, int, bool) {
	sent := 0
	for attempt := 1; lostConnection(res.Outcome); attempt++ {
		if !sleepCtx(ctx, ReconnectWait(attempt)) {
			return res, sent, false
		}
		res = s.Send(ctx, a.Turn(ReconnectID(id, attempt), session, turn, conv))
		sent++
	}
	return res, sent, true
}
