package reports

import (
	"fmt"
	"os"

	"pdsoak/ledger"
)

// Samples are the per-request figures behind a Results: what compare's bootstrap
// resamples.
type Samples struct {
	TTFT, ITL, E2E []float64
	// ITLEnds groups ITL by request: ITL[ITLEnds[i-1]:ITLEnds[i]] are the gaps of one
	// request (ITLEnds[-1] is 0), so that compare resamples whole requests. Nil: each
	// gap stands alone.
	ITLEnds []int
	// TTFTSessions and E2ESessions name each TTFT and E2E sample's agent session
	// (workload#session; "" for a request outside any session, as open-loop), so that
	// compare resamples an agent's correlated turns together. Nil: per request.
	TTFTSessions, E2ESessions []string
	// Workloads holds each workload's samples (their Workloads are empty).
	Workloads map[string]*Samples
}

// Run is one run's Results with the Samples they were computed from.
type Run struct {
	Results *Results
	Samples *Samples
}

// Samples returns the per-request figures gathered so far. The slices are the
// builder's own: do not change them.
func (b *Builder) Samples() *Samples {
	s := &Samples{TTFT: b.ttft, ITL: b.itl, ITLEnds: b.itlEnds, E2E: b.e2e, Workloads: map[string]*Samples{},
		TTFTSessions: b.ttftSess, E2ESessions: b.e2eSess}
	for name, w := range b.byWorkload {
		s.Workloads[name] = &Samples{TTFT: w.ttft, ITL: w.itl, ITLEnds: w.itlEnds, E2E: w.e2e,
			TTFTSessions: w.ttftSess, E2ESessions: w.e2eSess}
	}
	return s
}

// ComputeRun is ComputeFile that keeps the per-request samples (for compare).
func ComputeRun(path string, cfg Config) (*Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}
	defer f.Close()
	b := NewBuilder(cfg)
	st, err := ledger.ReadParallel(f, func(e ledger.Event) error { b.Add(e); return nil })
	if err != nil {
		return nil, err
	}
	res := b.Results()
	res.timeline = b.Timeline(res)
	if st.Torn {
		res.Notes = append(res.Notes, "the ledger's last line was torn (the run was interrupted while writing); it was skipped")
	}
	return &Run{Results: res, Samples: b.Samples()}, nil
}

func (b *Builder) workloadResults() map[string]WorkloadResult {
	if len(b.byWorkload) == 0 {
		return nil
	}
	out := make(map[string]WorkloadResult, len(b.byWorkload))
	for name, w := range b.byWorkload {
		r := WorkloadResult{Outcomes: map[ledger.Outcome]int{}, TTFT: percentiles(w.ttft), ITL: percentiles(w.itl), E2E: percentiles(w.e2e)}
		for _, o := range ledger.Outcomes {
			r.Outcomes[o] = w.outcomes[o]
			r.Requests += w.outcomes[o]
			if o.SilentDrop() {
				r.SilentDrops += w.outcomes[o]
			}
		}
		out[name] = r
	}
	return out
}
