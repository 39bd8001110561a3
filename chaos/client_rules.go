package chaos

import (
	"hash/fnv"
	"strconv"

	"pdsoak/scenarios"
)

// The client-side faults' rules, shared by the runner (harness) and the simulated
// client (sim): which workload a load or client fault is shaped like, what its extra
// requests are called, and which of the workloads' own streams a client_disconnect
// rule cancels.

// ClientTarget is the target of a client_disconnect rule that applies to every workload.
const ClientTarget = "client"

// WorkloadFor is the workload a load or client fault on target is shaped like: the one
// named target, or the first one (target "client", or a process name).
func WorkloadFor(sc *scenarios.Scenario, target string) scenarios.Workload {
	spec := sc.Workloads[0]
	for _, w := range sc.Workloads {
		if w.Name == target {
			spec = w
		}
	}
	return spec
}

// ExtraPrefix is the id prefix of the k-th batch of a fault's extra requests shaped
// like workload w ("<workload>-<kind><k>"), so they never collide with the workload's.
func ExtraPrefix(w, kind string, k int) string {
	return w + "-" + kind + strconv.Itoa(k)
}

// DisconnectRules are the client_disconnect faults acting on the workloads' own
// streams, by target (a workload name, or ClientTarget). Not safe for concurrent use.
type DisconnectRules struct {
	rules map[string]disconnectRule
}

type disconnectRule struct {
	afterTokens int
	fraction    float64
	stats       *LiveStats
}

// Set installs (afterTokens > 0) or removes the rule for target: a fraction of the
// streaming requests (outside (0, 1]: all) is cancelled after afterTokens tokens; stats,
// when set, counts the requests it hit.
func (d *DisconnectRules) Set(target string, afterTokens int, fraction float64, stats *LiveStats) {
	if afterTokens <= 0 {
		delete(d.rules, target)
		return
	}
	if fraction <= 0 || fraction > 1 {
		fraction = 1
	}
	if d.rules == nil {
		d.rules = map[string]disconnectRule{}
	}
	d.rules[target] = disconnectRule{afterTokens: afterTokens, fraction: fraction, stats: stats}
}

// CancelAfter is after how many tokens the client of request id of workload goes away
// (0: it does not) and the statistics that count it. Only streams are cancelled; the
// workload's own rule comes before ClientTarget's; which requests a fraction hits is
// decided by a hash of the id, so the choice is the same on every run of a seed.
func (d *DisconnectRules) CancelAfter(workload, id string, stream bool) (int, *LiveStats) {
	if !stream {
		return 0, nil
	}
	rule, ok := d.rules[workload]
	if !ok {
		rule, ok = d.rules[ClientTarget]
	}
	if !ok {
		return 0, nil
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	if float64(h.Sum32()%10000) >= rule.fraction*10000 {
		return 0, nil
	}
	return rule.afterTokens, rule.stats
}

// BurstWorkload is the shape of a load burst's extra requests against target: its
// workload (WorkloadFor) with the burst's prompt and completion lengths.
func BurstWorkload(sc *scenarios.Scenario, target string, b Burst) scenarios.Workload {
	spec := WorkloadFor(sc, target)
	if b.PromptTokens > 0 {
		spec.PromptTokens = b.PromptTokens
	}
	if b.MaxTokens > 0 {
		spec.MaxTokens = b.MaxTokens
	}
	return spec
}

// AbortWorkload is the shape of a client_disconnect's own extra streams against target.
func AbortWorkload(sc *scenarios.Scenario, target string) scenarios.Workload {
	spec := WorkloadFor(sc, target)
	spec.Stream = true
	return spec
}

// Tokens is how many tokens a disconnected stream receives before it is cancelled
// (at least one: a stream is cut mid-way, never before its first token).
func (d Disconnect) Tokens() int { return max(d.AfterTokens, 1) }
