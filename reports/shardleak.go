package reports

import (
	"fmt"
	"sort"
	"time"

	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// mergedLeaks gathers what a merged ledger says about leaks. Every shard runs its own
// leak check when it has drained, but a shard that drains early sees the other shards'
// requests still in flight: its check proves nothing. The one that counts is the check
// that started last, and only if every other shard had finished by then (judge).
type mergedLeaks struct {
	checks []shardLeak
	drain  map[int]time.Time // shard -> its drain event
	last   map[int]time.Time // shard -> its last activity: last done or drain, whichever later
}

type shardLeak struct {
	part    int
	started time.Time
	res     CheckResult
}

func (m *mergedLeaks) active(part int, at time.Time) {
	if m.last == nil {
		m.last = map[int]time.Time{}
	}
	if at.After(m.last[part]) {
		m.last[part] = at
	}
}

func (m *mergedLeaks) drained(part int, at time.Time) {
	if m.drain == nil {
		m.drain = map[int]time.Time{}
	}
	m.drain[part] = at
	m.active(part, at)
}

func (m *mergedLeaks) check(e ledger.Event) {
	c := shardLeak{part: e.Part, started: e.Time, res: CheckResult{State: StateNotEvaluated, Detail: e.Detail, Metrics: e.Metrics}}
	switch d, ok := m.drain[e.Part]; {
	case e.Started != nil:
		c.started = *e.Started
	case ok:
		// An older shard ledger: the check began after its drain, so the drain is the
		// earliest it can have started (the cautious side of "did others still run").
		c.started = d
	}
	if e.Passed != nil {
		c.res.State, c.res.Passed = newState(*e.Passed), *e.Passed
	} else if c.res.Detail == "" {
		c.res.Detail = "the harness could not run the leak check"
	}
	m.checks = append(m.checks, c)
}

// judge decides the merged run's leak check: the check of the shard whose check started
// last, if no other shard had a request in flight at its start (then it is the only one
// that saw the target as one process would have left it; an earlier check, if clean,
// implies this one is too). Otherwise not evaluated, naming the overlap: never a false
// pass or fail. The notes list every shard's own check.
func (m *mergedLeaks) judge(runStart time.Time) (*CheckResult, []string) {
	if len(m.checks) == 0 {
		return nil, nil
	}
	checks := append([]shardLeak(nil), m.checks...)
	sort.SliceStable(checks, func(i, j int) bool { return checks[i].part < checks[j].part })
	var notes []string
	auth := checks[0]
	for _, c := range checks {
		notes = append(notes, fmt.Sprintf("shard %d's own leak check (started at %.3fs): %s: %s",
			c.part, c.started.Sub(runStart).Seconds(), c.res.State, format.FirstNonEmpty(c.res.Detail, "no detail")))
		if c.started.After(auth.started) || (c.started.Equal(auth.started) && c.part > auth.part) {
			auth = c
		}
	}
	for _, c := range checks {
		if c.part == 0 {
			return &CheckResult{State: StateNotEvaluated, Detail: "a leak check in the merged ledger does not say which shard ran it (merge the shards with this harness's merge)"}, notes
		}
	}
	var others []int
	for p := range m.last {
		if p != auth.part && p != 0 {
			others = append(others, p)
		}
	}
	sort.Ints(others)
	for _, p := range others {
		if end := m.last[p]; !end.Before(auth.started) {
			return &CheckResult{State: StateNotEvaluated, Detail: fmt.Sprintf(
				"shard %d's leak check ran while shard %d still had requests in flight (its last finished %.3fs after the check began), so no shard's leak check saw the target idle",
				auth.part, p, end.Sub(auth.started).Seconds())}, notes
		}
	}
	res := auth.res
	res.Detail = fmt.Sprintf("shard %d's leak check, the last to start, after every other shard had finished: %s", auth.part, format.FirstNonEmpty(res.Detail, string(res.State)))
	return &res, notes
}
