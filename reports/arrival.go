package reports

import (
	"slices"
	"time"

	"pdsoak/ledger"
)

// maxArrivalBuckets bounds an arrival curve's length: the bucket widens past 1 s so
// that a long run still has at most this many.
const maxArrivalBuckets = 120

// ArrivalCurve compares a replayed schedule (a trace workload's) with what the harness
// achieved: per bucket from the run's start, how many requests were due and how many
// were actually sent, and the largest send lag. A harness that falls behind shows as
// sent trailing scheduled; latencies count from the schedule either way.
type ArrivalCurve struct {
	Workload      string  `json:"workload"`
	BucketSeconds float64 `json:"bucket_seconds"`
	Scheduled     []int   `json:"scheduled"`
	Sent          []int   `json:"sent"`
	// MaxLagSeconds is the largest sent - scheduled of the workload's requests.
	MaxLagSeconds float64 `json:"max_lag_seconds"`
}

// arrivals collects the scheduled and sent times of the workloads whose curves are
// wanted (Config.ArrivalWorkloads).
type arrivals struct {
	sched, sent map[string][]time.Time
	lag         map[string]time.Duration
}

func (a *arrivals) add(e ledger.Event, want []string) {
	if len(want) == 0 || !slices.Contains(want, e.Workload) {
		return
	}
	if a.sched == nil {
		a.sched, a.sent, a.lag = map[string][]time.Time{}, map[string][]time.Time{}, map[string]time.Duration{}
	}
	switch e.Type {
	case ledger.EventScheduled:
		a.sched[e.Workload] = append(a.sched[e.Workload], e.Time)
	case ledger.EventSent:
		a.sent[e.Workload] = append(a.sent[e.Workload], e.Time)
		if e.Scheduled != nil {
			a.lag[e.Workload] = max(a.lag[e.Workload], e.Time.Sub(*e.Scheduled))
		}
	}
}

// curves returns one curve per wanted workload that scheduled anything, in want's order.
func (a *arrivals) curves(start time.Time, want []string) []ArrivalCurve {
	var out []ArrivalCurve
	for _, w := range want {
		sched, sent := a.sched[w], a.sent[w]
		if len(sched) == 0 {
			continue
		}
		last := slices.MaxFunc(append(slices.Clone(sched), sent...), func(x, y time.Time) int { return x.Compare(y) })
		span := max(last.Sub(start), 0)
		bucket := time.Second
		if span >= maxArrivalBuckets*time.Second {
			bucket = (span / maxArrivalBuckets).Truncate(time.Second) + time.Second
		}
		n := int(span/bucket) + 1
		c := ArrivalCurve{Workload: w, BucketSeconds: bucket.Seconds(), Scheduled: make([]int, n), Sent: make([]int, n),
			MaxLagSeconds: round(a.lag[w].Seconds())}
		fill := func(ts []time.Time, into []int) {
			for _, t := range ts {
				if k := int(max(t.Sub(start), 0) / bucket); k < n {
					into[k]++
				}
			}
		}
		fill(sched, c.Scheduled)
		fill(sent, c.Sent)
		out = append(out, c)
	}
	return out
}
