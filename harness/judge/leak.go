package judge

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// LeakVerdict is the leak check's judgement of what the sources said last (see JudgeLeaks).
type LeakVerdict struct {
	// Passed: every source answered and every leak gauge read 0. Evaluated is false when
	// the check could not tell (Passed then means nothing).
	Passed, Evaluated bool
	// Residual holds "process/gauge" -> value of the gauges above 0 (failed checks only).
	Residual map[string]float64
	Detail   string
}

// JudgeLeaks judges one round of the leak check, for the runner (which scrapes the
// target's endpoints) and the simulator (which reads its virtual gauges) alike: for
// each process, its latest metrics (nil: it never answered) and the error of its
// latest scrape (nil: it answered; else latest is its last answer, which still
// counts). waited is how long the check has polled. It passes when every source
// answered with every leak gauge at 0; it fails when the last answer of some source
// still has a gauge above 0; anything else (no source, a source that never answered or
// stopped answering, no leak gauge at all) is not evaluated.
func JudgeLeaks(processes []string, latest []map[string]float64, errs []error, waited time.Duration) LeakVerdict {
	v := LeakVerdict{Residual: map[string]float64{}}
	var unknown []string
	seen := 0
	for i, p := range processes {
		switch {
		case latest[i] == nil:
			unknown = append(unknown, fmt.Sprintf("%s never answered (%v)", p, errs[i]))
		case errs[i] != nil:
			unknown = append(unknown, fmt.Sprintf("%s stopped answering (%v)", p, errs[i]))
		}
		for name, x := range latest[i] {
			if !IsLeakGauge(name) {
				continue
			}
			seen++
			if x != 0 {
				v.Residual[p+"/"+name] = x
			}
		}
	}
	if seen == 0 && len(unknown) == 0 {
		unknown = append(unknown, "no running/queued gauge (sglang:* or vllm:*) found in any scrape")
	}
	w := waited.Round(time.Millisecond)
	switch {
	case len(v.Residual) > 0:
		v.Evaluated = true
		keys := make([]string, 0, len(v.Residual))
		for k := range v.Residual {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		problems := make([]string, 0, len(keys)+len(unknown))
		for _, k := range keys {
			problems = append(problems, fmt.Sprintf("%s = %g", k, v.Residual[k]))
		}
		v.Detail = fmt.Sprintf("not drained after %v: %s", w, strings.Join(append(problems, unknown...), "; "))
	case len(unknown) > 0:
		v.Residual = nil
		v.Detail = fmt.Sprintf("not evaluated: after %v, %s", w, strings.Join(unknown, "; "))
	default:
		v.Passed, v.Evaluated = true, true
		v.Residual = nil
		v.Detail = fmt.Sprintf("running and queued gauges at 0 after %v (%d gauges on %d endpoints)", w, seen, len(processes))
	}
	return v
}

// LeakRound keeps what a polling leak check knows about each process between rounds:
// its last answer and the error of its latest scrape.
type LeakRound struct {
	Processes []string
	latest    []map[string]float64
	errs      []error
}

// NewLeakRound starts a leak check of processes.
func NewLeakRound(processes []string) *LeakRound {
	return &LeakRound{Processes: processes, latest: make([]map[string]float64, len(processes)),
		errs: make([]error, len(processes))}
}

// Update records one round of answers (vals[i] counts only when errs[i] is nil) and
// judges what is known after waited.
func (r *LeakRound) Update(vals []map[string]float64, errs []error, waited time.Duration) LeakVerdict {
	for i := range r.Processes {
		r.errs[i] = errs[i]
		if errs[i] == nil {
			r.latest[i] = vals[i]
		}
	}
	return JudgeLeaks(r.Processes, r.latest, r.errs, waited)
}
