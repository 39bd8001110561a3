package harness

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/harness/judge"
	"pdsoak/harness/phases"
	"pdsoak/harness/target"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// One health prober for the run: every ProbeInterval each health endpoint (the target
// and every process the harness launched) gets one GET, and that one answer feeds both
// records: liveness (liveState: target_down / target_up, liveness.go) and, for the
// entry process (target.EntryHealth), the health events truthful_health judges,
// recorded by phases.Health as the simulator's prober records them.
// Two probers at two intervals would hit the entry twice and could disagree about
// the same moment.

// DefaultProbeInterval is the period of the health probes (judge.ProbeInterval, the
// simulator's too).
const DefaultProbeInterval = judge.ProbeInterval

// probeTarget is one health endpoint: liveness events name src.Process; health, when
// set, is the entry process whose answers are health events too.
type probeTarget struct {
	src    target.Source
	health string
}

// probes is the running prober (startProbes).
type probes struct {
	r       *runner
	targets []probeTarget
	live    *phases.Prober
	// health writes the entry's answers as health events (load and drain).
	health *phases.Health
	ctx    context.Context
	cancel context.CancelFunc
	// hc opens a new connection for every probe (probeClient).
	hc       *http.Client
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// probeTargets are the liveness sources, the entry's marked for health events; an
// entry the liveness sources do not name is added.
func (r *runner) probeTargets() []probeTarget {
	proc, hurl := target.EntryHealth(r.sc, r.tgt.URL())
	var out []probeTarget
	found := false
	for _, s := range r.livenessSources() {
		t := probeTarget{src: s}
		if s.URL == hurl {
			t.health, found = proc, true
		}
		out = append(out, t)
	}
	if !found {
		out = append(out, probeTarget{src: target.Source{Process: proc, URL: hurl}, health: proc})
	}
	return out
}

// startProbes probes every target every ProbeInterval (Options.LivenessInterval when
// set) until stop; health events are written until stopHealth.
func (r *runner) startProbes(ctx context.Context) *probes {
	every := r.opts.LivenessInterval
	if every <= 0 {
		every = DefaultProbeInterval
	}
	p := &probes{r: r, targets: r.probeTargets(), ctx: ctx, hc: probeClient(r.sc)}
	for _, t := range p.targets {
		if t.health != "" {
			p.health = phases.NewHealth(t.health, t.src.URL, r.led.Emit)
		}
	}
	names, urls := make([]string, len(p.targets)), make([]string, len(p.targets))
	for i, t := range p.targets {
		names[i], urls[i] = t.src.Process, t.src.URL
	}
	p.live = phases.NewProber(names, urls, r.led.Emit)
	p.live.OnChange = func(ev ledger.Event) {
		if ev.Type == ledger.EventTargetDown {
			r.log.Warn("target down", "source", ev.Source, "url", ev.URL)
		} else {
			r.log.Info("target up", "source", ev.Source, "url", ev.URL)
		}
	}
	var pctx context.Context
	pctx, p.cancel = context.WithCancel(ctx)
	for i := range p.targets {
		p.wg.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-t.C:
				}
				p.probe(pctx, i)
			}
		})
	}
	return p
}

// stopHealth ends the health events (after the drain); liveness goes on.
func (p *probes) stopHealth() { p.health.Stop() }

// stop ends the probing (idempotent), then gives the sources their last say
// (phases.Prober.FinalTries): a target that came back once the faults were reverted is
// seen to, and one that died as the load ended is seen dead.
func (p *probes) stop() {
	p.stopOnce.Do(func() {
		p.stopHealth()
		p.cancel()
		p.wg.Wait()
		if p.ctx.Err() != nil {
			return // interrupted: no waiting
		}
		p.live.FinalTries(phases.Wall(p.ctx), func(due []int) {
			for _, i := range due {
				p.wg.Go(func() { p.probe(p.ctx, i) })
			}
			p.wg.Wait()
		})
	})
}

// probe sends one GET to target i (or reads its process state: processURL) and
// records what it says. Only one probe of a target runs at a time (its loop, or the
// final tries after that loop ended), so its liveness needs no lock. A probe cut short
// by ctx says nothing.
func (p *probes) probe(ctx context.Context, i int) {
	t := &p.targets[i]
	var health *healthProbe
	if t.health != "" && p.health.On() {
		health = p.startHealth(ctx)
	}
	var status int
	var err error
	if name, ok := strings.CutPrefix(t.src.URL, processURL); ok {
		err = p.r.tgt.(processAlive).Alive(name)
	} else {
		status, err = get(ctx, p.hc, t.src.URL)
	}
	if ctx.Err() != nil {
		health.cancel()
		return
	}
	health.answer(status, err)
	p.live.Observe(i, err == nil)
}

// healthProbe writes one health event for a probe: the answer if it came within
// phases.HealthTimeout, else phases.ErrHealthTimeout at that moment.
type healthProbe struct {
	h       *phases.Health
	claimed atomic.Bool
	timer   *time.Timer
	fired   sync.WaitGroup
}

func (p *probes) startHealth(ctx context.Context) *healthProbe {
	h := &healthProbe{h: p.health}
	h.fired.Add(1)
	h.timer = time.AfterFunc(phases.HealthTimeout, func() {
		defer h.fired.Done()
		if ctx.Err() == nil && h.claimed.CompareAndSwap(false, true) {
			h.h.Record(0, phases.ErrHealthTimeout)
		}
	})
	return h
}

// answer writes the probe's answer unless the timeout already wrote its failure, and
// waits for a timeout that is writing.
func (h *healthProbe) answer(status int, err error) {
	if h == nil {
		return
	}
	if h.claimed.CompareAndSwap(false, true) {
		h.h.Record(status, err)
	}
	h.cancel()
}

// cancel stops the timeout and waits for it if it already fired.
func (h *healthProbe) cancel() {
	if h == nil {
		return
	}
	if h.timer.Stop() {
		h.fired.Done()
	}
	h.fired.Wait()
}

// probeClient is the prober's client: the run's auxiliary transport with keep-alives
// off. req.Close alone does not keep http.Transport from handing a probe an idle
// connection the metrics or target-info GETs left, and that connection can outlive the
// target's listener (or the process behind a proxy): a target refusing every new
// connection then passed for alive.
func probeClient(sc *scenarios.Scenario) *http.Client {
	tr := auxTransport(sc)
	switch t := tr.(type) {
	case *http.Transport:
		t.DisableKeepAlives = true
	case *targetHeaders:
		t.base.DisableKeepAlives = true
	}
	return &http.Client{Transport: tr}
}

// get sends one GET to url on a fresh connection (hc is probeClient's) and returns the
// status; err when no HTTP answer came within livenessTimeout (a 503 is an answer: a
// live process saying it is unwell).
func get(ctx context.Context, hc *http.Client, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, livenessTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Close = true
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// healthEndpoint is a base URL's /health, as the liveness sources and
// target.EntryHealth both spell it.
func healthEndpoint(base string) string { return target.HealthURL(base) }
