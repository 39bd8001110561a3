package harness

import (
	"context"
	"fmt"
	"time"

	"pdsoak/harness/judge"
	"pdsoak/harness/target"
	"pdsoak/server/launcher"
)

// livenessTimeout bounds one probe (judge's, shared with the simulator); the one
// prober (probe.go) folds the answers with phases.Prober.
const livenessTimeout = judge.LivenessTimeout

// livenessSources are the health endpoints to probe: every process of the embedded
// topology, every launched process (its health_url, or its process state when it has
// none: processURL), and the target's own /health.
func (r *runner) livenessSources() []target.Source {
	var out []target.Source
	seen := map[string]bool{}
	add := func(name, url string) {
		if url != "" && !seen[url] {
			seen[url] = true
			out = append(out, target.Source{Process: name, URL: url})
		}
	}
	if e, ok := r.tgt.(interface{ Topology() *launcher.Topology }); ok {
		for _, p := range e.Topology().Processes() {
			add(p.Name, p.URL+"/health")
		}
	}
	_, procs := r.tgt.(processAlive)
	for _, l := range r.sc.Target.Launch {
		if l.HealthURL == "" && procs {
			add(l.Name, processURL+l.Name) // a process that dies is seen dead even without /health
			continue
		}
		add(l.Name, l.HealthURL)
	}
	add("target", healthEndpoint(r.tgt.URL()))
	return out
}

// processURL names a liveness source probed by its process state (processAlive), not
// over HTTP: a launched process with no health_url. It is the URL its events carry.
const processURL = "process://"

// processAlive is implemented by a target that launched its processes (target.Launched).
type processAlive interface {
	Alive(name string) error
}

// interrupted runs right after Ctrl-C, while the requests are still in flight: from
// now on a request the drain cancels is recorded with its age, overdue ones as silent
// drops (see judge.AtInterrupt); and when any is already past its first-token deadline, a
// forensics bundle shows where the server holds them.
func (r *runner) interrupted(ctx context.Context, fb *bundles) {
	if ctx.Err() == nil {
		return
	}
	r.exec.interrupted.Store(true)
	n, oldest := r.exec.live.pastFirstToken(time.Now())
	if n == 0 || !fb.enabled() {
		return
	}
	// Bounded by the collectors' own timeouts, so Ctrl-C still returns within seconds;
	// a second Ctrl-C (Options.Hurry) skips it or cuts it short.
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if h := r.opts.Hurry; h != nil {
		if h.Err() != nil {
			return
		}
		defer context.AfterFunc(h, cancel)()
	}
	fb.write(bctx, "interrupt",
		fmt.Sprintf("interrupted with %d requests in flight past their first-token deadline (oldest %v)", n, oldest.Round(time.Millisecond)))
}
