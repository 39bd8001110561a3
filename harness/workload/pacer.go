package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"pdsoak/scenarios"
)

// MaxScheduled bounds the precomputed schedule of one open-loop window.
const MaxScheduled = 5_000_000

// NewPacer builds a vegeta.Pacer from a scenario pacer. The rng seeds the Poisson
// pacer; du bounds its precomputed arrivals.
func NewPacer(p *scenarios.Pacer, rng *rand.Rand, du time.Duration) (vegeta.Pacer, error) {
	if p == nil {
		return nil, fmt.Errorf("workload: open_loop needs a pacer")
	}
	if p.Rate <= 0 && p.Type != scenarios.PacerLinear {
		return nil, fmt.Errorf("workload: pacer rate must be > 0, got %v", p.Rate)
	}
	switch p.Type {
	case scenarios.PacerConstant, "":
		return vegetaRate(p.Rate), nil
	case scenarios.PacerLinear:
		if p.Rate <= 0 && p.Slope <= 0 {
			return nil, fmt.Errorf("workload: linear pacer needs rate or slope > 0")
		}
		return vegeta.LinearPacer{StartAt: vegetaRate(math.Max(p.Rate, 1e-3)), Slope: p.Slope}, nil
	case scenarios.PacerSine:
		if p.Period <= 0 {
			return nil, fmt.Errorf("workload: sine pacer needs a period > 0")
		}
		if p.Amplitude > p.Rate {
			return nil, fmt.Errorf("workload: sine amplitude %v exceeds its mean rate %v", p.Amplitude, p.Rate)
		}
		return vegeta.SinePacer{Period: p.Period.D(), Mean: vegetaRate(p.Rate), Amp: vegetaRate(p.Amplitude), StartAt: vegeta.MeanUp}, nil
	case scenarios.PacerPoisson:
		return NewPoisson(p.Rate, rng), nil
	}
	return nil, fmt.Errorf("workload: unknown pacer %q", p.Type)
}

// vegetaRate expresses r requests/s as a vegeta Rate with integer frequency.
func vegetaRate(r float64) vegeta.Rate {
	if r >= 1 && r == math.Trunc(r) {
		return vegeta.Rate{Freq: int(r), Per: time.Second}
	}
	// Fractional rates: hits per a longer period keep integer Freq.
	return vegeta.Rate{Freq: max(int(math.Round(r*1000)), 1), Per: 1000 * time.Second}
}

// Poisson is a vegeta.Pacer with exponentially distributed gaps (a Poisson arrival
// process of rate Lambda per second). Arrival times are drawn from a seeded generator
// and memoised, so Pace is a pure function of (elapsed, hits): the same seed gives the
// same schedule whatever the timing of the caller.
type Poisson struct {
	Lambda float64
	mu     sync.Mutex
	rng    *rand.Rand
	at     []time.Duration // at[i] is the ideal time of hit i
}

var _ vegeta.Pacer = (*Poisson)(nil)

// NewPoisson returns a Poisson pacer of rate lambda per second.
func NewPoisson(lambda float64, rng *rand.Rand) *Poisson {
	return &Poisson{Lambda: lambda, rng: rng}
}

// Arrival returns the ideal time of hit i.
func (p *Poisson) Arrival(i uint64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uint64(len(p.at)) <= i {
		var last time.Duration
		if n := len(p.at); n > 0 {
			last = p.at[n-1]
		}
		gap := time.Duration(p.rng.ExpFloat64() / p.Lambda * float64(time.Second))
		p.at = append(p.at, last+gap)
	}
	return p.at[i]
}

// Pace implements vegeta.Pacer.
func (p *Poisson) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if p.Lambda <= 0 {
		return 0, true
	}
	if hits >= MaxScheduled {
		return 0, true
	}
	wait := p.Arrival(hits) - elapsed
	if wait < 0 {
		wait = 0
	}
	return wait, false
}

// Rate implements vegeta.Pacer.
func (p *Poisson) Rate(time.Duration) float64 { return p.Lambda }

func (p *Poisson) String() string { return fmt.Sprintf("Poisson{%g hits/1s}", p.Lambda) }

// Schedule returns the ideal send time (offset from the attack's start) of every hit
// vegeta's Attack loop would send in du: it replays the loop — ask the pacer, wait,
// send — as if the attacker were never late. limit caps the count (0: MaxScheduled).
func Schedule(p vegeta.Pacer, du time.Duration, limit int) []time.Duration {
	if limit <= 0 || limit > MaxScheduled {
		limit = MaxScheduled
	}
	var out []time.Duration
	var t time.Duration
	for len(out) < limit {
		if du > 0 && t > du {
			break
		}
		wait, stop := p.Pace(t, uint64(len(out)))
		if stop {
			break
		}
		if wait > 0 {
			t += wait
		}
		if du > 0 && t >= du {
			break // hits due at the very end of the window would race its end
		}
		out = append(out, t)
	}
	return out
}
