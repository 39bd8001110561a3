package workload

import (
	"context"

	"pdsoak/chaos"
	"pdsoak/scenarios"
)

// ClientFaults carries out the client-side faults for a driver (chaos.Env's Load and
// Disconnect): which requests a burst or a client_disconnect sends, how many, how many
// at once and when each cancels itself, and the rule on the workloads' own streams, are
// decided here once for the real runner (goroutines) and the simulator (its loop); the
// driver only sends.
type ClientFaults struct {
	Scenario *scenarios.Scenario
	// Seq numbers the faults' series of extra requests (1, 2, …; chaos.ExtraPrefix).
	Seq func() int
	// SendMany sends Extras of c (n requests, conc in flight, each cancelling itself after
	// cancelAfter tokens), counted in the Run's statistics; the Run's Stop cancels what is
	// in flight and sends no more.
	SendMany func(ctx context.Context, c *Common, n, conc, cancelAfter int) chaos.Run
	// SetDisconnect sets the rule that cancels a fraction of target's own streams after
	// afterTokens, counted in stats (afterTokens 0: no rule).
	SetDisconnect func(target string, afterTokens int, fraction float64, stats *chaos.LiveStats)
}

// Fill sets env's Load and Disconnect.
func (f ClientFaults) Fill(env *chaos.FuncEnv) {
	env.LoadFunc = func(ctx context.Context, target string, b chaos.Burst) (chaos.Run, error) {
		return f.SendMany(ctx, f.extra(chaos.BurstWorkload(f.Scenario, target, b), "burst"), b.Requests, b.Concurrency, 0), nil
	}
	env.DisconnectFunc = func(ctx context.Context, target string, d chaos.Disconnect) (chaos.Run, error) {
		if d.Requests > 0 { // streams of their own that cancel themselves
			return f.SendMany(ctx, f.extra(chaos.AbortWorkload(f.Scenario, target), "abort"), d.Requests, 0, d.Tokens()), nil
		}
		st := &chaos.LiveStats{}
		f.SetDisconnect(target, d.Tokens(), d.Fraction, st)
		return chaos.FuncRun{StatsFunc: st.Snapshot, StopFunc: func() { f.SetDisconnect(target, 0, 0, nil) }}, nil
	}
}

// extra is the request factory of a fault's extra requests: ids of their own
// ("<workload>-<kind><k>-<seq>"), never colliding with the workload's.
func (f ClientFaults) extra(spec scenarios.Workload, kind string) *Common {
	return Extra(f.Scenario, spec, chaos.ExtraPrefix(spec.Name, kind, f.Seq()))
}
