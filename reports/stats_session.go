package reports

import (
	"fmt"
	"sort"

	"pdsoak/ledger"
)

// GroupBySession reorders samples so that each session's samples are contiguous and
// returns them with the group ends BootstrapRelDiffsGrouped takes: the samples of one key
// form one group (an agent's turns, resampled together since they are correlated: a slow
// turn makes the session's next turns late too); a sample with key "" is its own group
// (an open-loop request). With no key set it returns xs and nil ends: per sample. keys
// must be as long as xs or nil.
func GroupBySession(xs []float64, keys []string) ([]float64, []int) {
	if len(keys) != len(xs) {
		return xs, nil
	}
	order := map[string]int{}
	var names []string
	for _, k := range keys {
		if k == "" {
			continue
		}
		if _, ok := order[k]; !ok {
			order[k] = len(names)
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return xs, nil
	}
	byGroup := make([][]float64, len(names))
	vals := make([]float64, 0, len(xs))
	ends := make([]int, 0, len(names)+len(xs))
	for i, k := range keys {
		if k == "" {
			vals = append(vals, xs[i])
			ends = append(ends, len(vals))
			continue
		}
		byGroup[order[k]] = append(byGroup[order[k]], xs[i])
	}
	for _, g := range byGroup {
		vals = append(vals, g...)
		ends = append(ends, len(vals))
	}
	return vals, ends
}

// PoolRuns pools several runs of one scenario (a baseline of the last N good nights)
// into one Run: every request of every run, sessions kept apart per run, the outcome
// counts summed, the percentiles recomputed from the pooled samples, throughput the
// runs' mean; the verdict is PASS only when every run passed. Faults and the rest are
// the first run's. One run is returned as is.
func PoolRuns(runs []*Run) (*Run, error) {
	switch len(runs) {
	case 0:
		return nil, fmt.Errorf("reports: pool: no runs")
	case 1:
		return runs[0], nil
	}
	first := *runs[0].Results
	res := &first
	res.Outcomes = map[ledger.Outcome]int{}
	res.Requests, res.SilentDrops, res.Throughput = 0, 0, 0
	res.ByWorkload = map[string]WorkloadResult{}
	var samples []*Samples
	for i, r := range runs {
		if r == nil || r.Results == nil {
			return nil, fmt.Errorf("reports: pool: run %d has no results", i+1)
		}
		b := r.Results
		for o, n := range b.Outcomes {
			res.Outcomes[o] += n
		}
		res.Requests += b.Requests
		res.SilentDrops += b.SilentDrops
		res.Throughput += b.Throughput / float64(len(runs))
		if b.Verdict != VerdictPass {
			res.Verdict = b.Verdict
		}
		for name, w := range b.ByWorkload {
			p := res.ByWorkload[name]
			if p.Outcomes == nil {
				p.Outcomes = map[ledger.Outcome]int{}
			}
			for o, n := range w.Outcomes {
				p.Outcomes[o] += n
			}
			p.Requests += w.Requests
			p.SilentDrops += w.SilentDrops
			res.ByWorkload[name] = p
		}
		s := r.Samples
		if s == nil {
			s = &Samples{}
		}
		samples = append(samples, s)
	}
	pooled := poolSamples(samples)
	res.TTFT, res.ITL, res.E2E = percentiles(pooled.TTFT), percentiles(pooled.ITL), percentiles(pooled.E2E)
	for name, w := range res.ByWorkload {
		if ws := pooled.Workloads[name]; ws != nil {
			w.TTFT, w.ITL, w.E2E = percentiles(ws.TTFT), percentiles(ws.ITL), percentiles(ws.E2E)
		}
		res.ByWorkload[name] = w
	}
	return &Run{Results: res, Samples: pooled}, nil
}

// poolSamples concatenates samples, keeping each run's sessions and ITL requests apart.
func poolSamples(runs []*Samples) *Samples {
	out := &Samples{Workloads: map[string]*Samples{}}
	anyTTFTKey, anyE2EKey := false, false
	for _, s := range runs {
		anyTTFTKey = anyTTFTKey || len(s.TTFTSessions) > 0
		anyE2EKey = anyE2EKey || len(s.E2ESessions) > 0
	}
	names := map[string]bool{}
	for i, s := range runs {
		prefix := fmt.Sprintf("run%d/", i+1)
		out.TTFT = append(out.TTFT, s.TTFT...)
		out.E2E = append(out.E2E, s.E2E...)
		if anyTTFTKey {
			out.TTFTSessions = append(out.TTFTSessions, prefixKeys(prefix, s.TTFTSessions, len(s.TTFT))...)
		}
		if anyE2EKey {
			out.E2ESessions = append(out.E2ESessions, prefixKeys(prefix, s.E2ESessions, len(s.E2E))...)
		}
		base := len(out.ITL)
		out.ITL = append(out.ITL, s.ITL...)
		if s.ITLEnds == nil {
			for j := range s.ITL {
				out.ITLEnds = append(out.ITLEnds, base+j+1)
			}
		} else {
			for _, e := range s.ITLEnds {
				out.ITLEnds = append(out.ITLEnds, base+e)
			}
		}
		for n := range s.Workloads {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		var ws []*Samples
		for _, s := range runs {
			if w := s.Workloads[n]; w != nil {
				ws = append(ws, w)
			} else {
				ws = append(ws, &Samples{})
			}
		}
		out.Workloads[n] = poolSamples(ws)
	}
	return out
}

// prefixKeys prefixes the non-empty keys; nil keys stand for n samples outside sessions.
func prefixKeys(prefix string, keys []string, n int) []string {
	out := make([]string, n)
	for i := range out {
		if i < len(keys) && keys[i] != "" {
			out[i] = prefix + keys[i]
		}
	}
	return out
}
