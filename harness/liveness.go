package harness

import (
	"context"
	"fmt"
	"time"

	"pdsoak/harness/target"
	"pdsoak/ledger"
	"pdsoak/server/launcher"
)

// Liveness: the target and every process the harness launched are asked for their
// health endpoint through the run (by the one prober, probe.go), and each change of
// mind is a target_down or target_up event. Down means no HTTP answer at all (refused,
// reset, or silent past livenessTimeout) on livenessFailures probes in a row: a 503
// from /health is a live process saying it is unwell, which the other assertions judge.
const (
	// livenessTimeout bounds one probe; generous, so a loaded server is not called dead.
	livenessTimeout = 10 * time.Second
	// livenessFailures is how many failed probes in a row make a source down.
	livenessFailures = 2
	// livenessFinalTries are the last probes of a down source once the faults are
	// reverted, livenessFinalGap apart: did it come back?
	livenessFinalTries = 3
	livenessFinalGap   = time.Second
)

// liveState is one source's liveness, a pure state machine: observe says whether a
// probe result changes what the ledger should say.
type liveState struct {
	fails int
	down  bool
}

// observe folds one probe (ok: an HTTP answer came) and returns the event to write,
// if any.
func (s *liveState) observe(ok bool) (ledger.EventType, bool) {
	if ok {
		s.fails = 0
		if s.down {
			s.down = false
			return ledger.EventTargetUp, true
		}
		return "", false
	}
	s.fails++
	if !s.down && s.fails >= livenessFailures {
		s.down = true
		return ledger.EventTargetDown, true
	}
	return "", false
}

// livenessSources are the health endpoints to probe: every process of the embedded
// topology, every launched process with a health_url, and the target's own /health.
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
	for _, l := range r.sc.Target.Launch {
		add(l.Name, l.HealthURL)
	}
	add("target", healthEndpoint(r.tgt.URL()))
	return out
}

// liveEvent folds a probe into a source's state and writes the event it calls for.
func (r *runner) liveEvent(src target.Source, st *liveState, ok bool) {
	typ, changed := st.observe(ok)
	if !changed {
		return
	}
	msg := src.Process + " answers its health probe again"
	if typ == ledger.EventTargetDown {
		msg = fmt.Sprintf("%s does not answer its health probe (%s) %d times in a row", src.Process, src.URL, livenessFailures)
		r.log.Warn("target down", "source", src.Process, "url", src.URL)
	} else {
		r.log.Info("target up", "source", src.Process, "url", src.URL)
	}
	r.led.Emit(ledger.Event{Type: typ, Source: src.Process, URL: src.URL, Message: msg})
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// interrupted runs right after Ctrl-C, while the requests are still in flight: from
// now on a request the drain cancels is recorded with its age, overdue ones as silent
// drops (see atInterrupt); and when any is already past its first-token deadline, a
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
