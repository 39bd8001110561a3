package engine

import (
	"fmt"
	"slices"
	"time"

	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// The engine loop's rules that are not the scheduler's, as pure functions: the loop
// calls them with its clock and its sockets, the simulator (sim) with its virtual ones,
// so both retry bootstraps, age request lists and measure throughput alike.

// Bootstrap retries of scheduler.BugBootstrapRetryEveryStep: attempts per address per
// loop iteration, the pause between them and the bound of one dial. Upstream: 20 tries
// 1 s apart inside ensure_parallel_info, on the scheduler thread.
const (
	BootRetryAttempts = 3
	BootRetryPause    = 300 * time.Millisecond
	BootDialTimeout   = 300 * time.Millisecond
)

// RefusedBootstrapCost is how long one round of retries blocks the loop for an address
// whose dials are refused at once (process down, port closed): the pauses between the
// attempts.
const RefusedBootstrapCost = (BootRetryAttempts - 1) * BootRetryPause

// PendBootstraps applies a plan's cancels and new transfers to the transfers waiting
// for their bootstrap server: cancelled rooms leave pending; under
// BugBootstrapRetryEveryStep (retryEveryStep) new transfers join it, to be started by
// RetryBootstrap, else they start at once (start). The driver cancels rd's rooms first:
// a transfer must stop touching pages before they are reused.
func PendBootstraps(pending []scheduler.Transfer, rd *scheduler.Ready, retryEveryStep bool) (keep, start []scheduler.Transfer) {
	keep = pending
	for _, c := range rd.Cancels {
		keep = slices.DeleteFunc(keep, func(t scheduler.Transfer) bool { return t.Room == c.Room })
	}
	if retryEveryStep {
		return append(keep, rd.Transfers...), nil
	}
	return keep, rd.Transfers
}

// RetryBootstrap is one round of BugBootstrapRetryEveryStep (sgl-project/sglang PRs
// #19900 and #20785): reachable is asked once per bootstrap address, in the order of
// pending; the transfers whose address answers start, the others stay pending for the
// next iteration. unreachable lists the addresses that did not answer, in order.
func RetryBootstrap(pending []scheduler.Transfer, reachable func(addr string) bool) (start, keep []scheduler.Transfer, unreachable []string) {
	up := map[string]bool{}
	for _, t := range pending {
		ok, seen := up[t.Addr]
		if !seen {
			ok = reachable(t.Addr)
			up[t.Addr] = ok
			if !ok {
				unreachable = append(unreachable, t.Addr)
			}
		}
		if ok {
			start = append(start, t)
		} else {
			keep = append(keep, t)
		}
	}
	return start, keep, unreachable
}

// ClientGoneError is the abort of a request whose client went away.
func ClientGoneError() error { return fmt.Errorf("engine: client went away: %w", gen.ErrAborted) }

// StepFailpointError fails a step whose engine/step failpoint returned arg.
func StepFailpointError(arg string) error {
	return fmt.Errorf("engine: failpoint %s: %s", failpoint.EngineStep, arg)
}

// SnapEvery is how often the loop rebuilds its request list unasked.
const SnapEvery = 50 * time.Millisecond

// AgeRequests is a request list built at snapTime as /debug/requests answers it at
// now: every age grown by the time since (never shrunk).
func AgeRequests(snap []gen.RequestInfo, snapTime, now time.Time) []gen.RequestInfo {
	dt := now.Sub(snapTime).Seconds()
	if snapTime.IsZero() || dt < 0 {
		dt = 0
	}
	out := make([]gen.RequestInfo, len(snap))
	for i, ri := range snap {
		ri.AgeSeconds += dt
		ri.StageAgeSeconds += dt
		out[i] = ri
	}
	return out
}

// ThroughputWindow is the shortest span sglang:gen_throughput is measured over.
const ThroughputWindow = time.Second

// Throughput is sglang:gen_throughput as the loop publishes it: generated tokens per
// second since the last update at least ThroughputWindow ago.
type Throughput struct {
	at   time.Time
	toks uint64
}

// Update takes the scheduler's generated-token count at now. live is whether gauges
// move at this iteration (always under strict semantics; under SGLang's only when the
// scheduler refreshes its stats, so the gauge freezes with the others). ok reports a
// new rate.
func (t *Throughput) Update(now time.Time, generated uint64, live bool) (rate float64, ok bool) {
	if !live || now.Sub(t.at) < ThroughputWindow {
		return 0, false
	}
	if !t.at.IsZero() {
		rate, ok = float64(generated-t.toks)/now.Sub(t.at).Seconds(), true
	}
	t.at, t.toks = now, generated
	return rate, ok
}

// DoneEvent is the last event of a request's stream: how it finished.
func DoneEvent(f scheduler.Finish) gen.Event {
	return gen.Event{Done: true, Finish: f.Reason, Err: f.Err, PromptTokens: f.PromptTokens, CompletionTokens: f.CompletionTokens}
}

// PrefillCompleted reports whether f counts in pdsoak:prefills_completed_total: a
// prefill request that finished well (Sent: its KV reached decode).
func PrefillCompleted(role Role, f scheduler.Finish) bool {
	return f.Err == nil && role == RolePrefill
}
