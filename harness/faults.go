package harness

import (
	"context"
	"log/slog"
	"time"

	"pdsoak/harness/client"
	"pdsoak/harness/workload"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

// FaultRunner runs a scenario's fault timeline: it applies each fault at LoadStart+at,
// verifies it, reverts it after its duration, logs fault_start / fault_verified /
// fault_stop events through env.Emit, and reverts everything still applied when ctx
// ends. It returns once nothing is applied any more. An error means a fault could not
// be applied or did not take effect: the run is invalid (ErrInfrastructure).
type FaultRunner func(ctx context.Context, env *FaultEnv) error

// FaultEnv is what the runner hands a FaultRunner.
type FaultEnv struct {
	Scenario  *scenarios.Scenario
	LoadStart time.Time
	// Target is the endpoint under test; Target.Handle() is the launcher's topology
	// for the embedded reference server (nil for external targets).
	Target Target
	Logger *slog.Logger
	// Emit records an event in the ledger.
	Emit func(reports.Event)
	// Scrape returns the summed samples of a process's /metrics ("target" for an
	// external metrics_url).
	Scrape func(ctx context.Context, process string) (map[string]float64, error)
	// Burst sends n extra requests shaped like the named workload ("client": the
	// first workload) with at most concurrency in flight (0: all at once) and returns
	// once they have ended; their outcomes are in the ledger like any request's.
	Burst func(ctx context.Context, target string, n, concurrency int) BurstStats
	// SetDisconnect makes streaming requests of a workload (or "client": all) cancel
	// themselves after afterTokens tokens, for the given fraction of requests;
	// afterTokens 0 removes the rule.
	SetDisconnect func(target string, afterTokens int, fraction float64)
}

// BurstStats counts the outcomes of a burst.
type BurstStats struct {
	Sent     int
	Outcomes map[reports.Outcome]int
}

// burst implements FaultEnv.Burst over the executor.
func (r *runner) burst(ctx context.Context, target string, n, concurrency int) BurstStats {
	st := BurstStats{Outcomes: map[reports.Outcome]int{}}
	if n <= 0 || len(r.sc.Workloads) == 0 {
		return st
	}
	spec := r.sc.Workloads[0]
	for _, w := range r.sc.Workloads {
		if w.Name == target {
			spec = w
		}
	}
	spec.Name = spec.Name + "-burst" + itoa(int(r.burstSeq.Add(1)))
	c := &workload.Common{Spec: spec, Seed: r.sc.Seed, Model: r.sc.Target.Model, Deadlines: workload.Deadlines(r.sc.Deadlines)}
	if concurrency <= 0 || concurrency > n {
		concurrency = n
	}
	sem := make(chan struct{}, concurrency)
	results := make(chan *client.Result, n)
	now := time.Now()
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			n = i
		}
		if ctx.Err() != nil {
			break
		}
		go func(seq uint64) {
			defer func() { <-sem }()
			results <- r.exec.Send(ctx, c.Single(seq, now))
		}(uint64(i))
		st.Sent++
	}
	for i := 0; i < st.Sent; i++ {
		res := <-results
		st.Outcomes[res.Outcome]++
	}
	return st
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
