package reports

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"pdsoak/ledger"
)

// GPUResult summarises a run's GPU samples. Utilisation figures are percents over every
// device reading that had one.
//
// A sample is "stuck" when requests were in flight at its time (scheduled with no done
// event yet) and none completed since the previous GPU sample, where completing means a
// done event with an answer from the server (any outcome but stalled, deadline_exceeded
// and cancelled). StuckUtilMean is the incident's figure: requests hang while the GPUs
// sit idle shows as stuck samples with a mean utilisation near 0.
type GPUResult struct {
	// Devices lists every device seen ("0: NVIDIA H200 GPU-…").
	Devices []string `json:"devices"`
	Samples int      `json:"samples"`
	UtilMax float64  `json:"util_max"`
	// UtilMean is the mean over all samples; MemUsedMaxPct the highest memory use seen,
	// as a percent of the device's memory.
	UtilMean      float64 `json:"util_mean"`
	MemUsedMaxPct float64 `json:"mem_used_max_pct"`
	// StuckSamples counts stuck samples, StuckSeconds the time since the previous sample
	// summed over them, StuckInFlightMax the most requests in flight in one of them.
	StuckSamples     int     `json:"stuck_samples"`
	StuckSeconds     float64 `json:"stuck_seconds"`
	StuckInFlightMax int     `json:"stuck_in_flight_max"`
	// StuckUtilMean is the mean utilisation over stuck samples; absent when none.
	StuckUtilMean *float64 `json:"stuck_util_mean,omitempty"`
	// ReadErrors counts device readings that had at least one failed read.
	ReadErrors int `json:"read_errors,omitempty"`
}

// gpuStats folds GPU samples and request events into a GPUResult as the ledger streams.
type gpuStats struct {
	open      map[string]bool // scheduled, not done
	completed int             // answered done events since the previous GPU sample
	last      time.Time       // previous GPU sample (or the first scheduled request)
	devices   map[string]bool
	samples   int
	utilSum   float64
	utilN     int
	utilMax   float64
	memMax    float64
	stuck     int
	stuckSec  float64
	stuckMaxN int
	stuckSum  float64
	stuckN    int
	errors    int
}

func newGPUStats() *gpuStats {
	return &gpuStats{open: map[string]bool{}, devices: map[string]bool{}}
}

func (g *gpuStats) scheduled(e ledger.Event) {
	if e.RequestID == "" {
		return
	}
	g.open[e.RequestID] = true
	if g.last.IsZero() {
		g.last = e.Time
	}
}

func (g *gpuStats) done(e ledger.Event) {
	if !g.open[e.RequestID] {
		return
	}
	delete(g.open, e.RequestID)
	if !e.Outcome.SilentDrop() && e.Outcome != ledger.OutcomeCancelled {
		g.completed++
	}
}

func (g *gpuStats) sample(e ledger.Event) {
	g.samples++
	stuck := len(g.open) > 0 && g.completed == 0
	if stuck {
		g.stuck++
		if !g.last.IsZero() && e.Time.After(g.last) {
			g.stuckSec += e.Time.Sub(g.last).Seconds()
		}
		g.stuckMaxN = max(g.stuckMaxN, len(g.open))
	}
	g.completed = 0
	g.last = e.Time
	for _, d := range e.GPUs {
		id := fmt.Sprintf("%d: %s %s", d.Index, d.Name, d.UUID)
		g.devices[strings.TrimSpace(id)] = true
		if len(d.Errors) > 0 {
			g.errors++
		}
		if d.MemUsed != nil && d.MemTotal != nil && *d.MemTotal > 0 {
			g.memMax = max(g.memMax, 100*float64(*d.MemUsed)/float64(*d.MemTotal))
		}
		if d.Util == nil {
			continue
		}
		u := *d.Util
		g.utilSum += u
		g.utilN++
		g.utilMax = max(g.utilMax, u)
		if stuck {
			g.stuckSum += u
			g.stuckN++
		}
	}
}

// result returns nil when the ledger had no GPU sample.
func (g *gpuStats) result() *GPUResult {
	if g.samples == 0 {
		return nil
	}
	r := &GPUResult{Samples: g.samples, UtilMax: g.utilMax, MemUsedMaxPct: round2(g.memMax),
		StuckSamples: g.stuck, StuckSeconds: round2(g.stuckSec), StuckInFlightMax: g.stuckMaxN,
		ReadErrors: g.errors, Devices: make([]string, 0, len(g.devices))}
	for d := range g.devices {
		r.Devices = append(r.Devices, d)
	}
	sort.Strings(r.Devices)
	if g.utilN > 0 {
		r.UtilMean = round2(g.utilSum / float64(g.utilN))
	}
	if g.stuckN > 0 {
		m := round2(g.stuckSum / float64(g.stuckN))
		r.StuckUtilMean = &m
	}
	return r
}

func round2(x float64) float64 {
	return float64(int64(x*100+0.5)) / 100
}
