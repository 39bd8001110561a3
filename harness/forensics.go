package harness

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"pdsoak/harness/forensics"
	"pdsoak/harness/judge"
	"pdsoak/harness/target"
	"pdsoak/ledger"
	"pdsoak/reports"
)

// Bundle bounds of the runner (the forensics package's defaults bound each collector).
const (
	// maxWedgeBundles caps the wedged-<t> bundles of one run: a run that wedges again
	// and again needs the first few, not one per wedge.
	maxWedgeBundles = 3
	// wedgeIdleUtil is the GPU utilisation (percent) at or below which a GPU counts as idle.
	wedgeIdleUtil = 5
)

// bundles writes the forensics bundles of a run: at most one per trigger kind except
// wedges (maxWedgeBundles), in the background while the run goes on; wait holds the
// target's teardown until they are written.
type bundles struct {
	r         *runner
	t0        time.Time // load start; bundle names carry the time since
	firstDrop sync.Once
	mu        sync.Mutex
	wedges    int
	names     map[string]bool
	wg        sync.WaitGroup
}

func (r *runner) newBundles() *bundles {
	return &bundles{r: r, t0: time.Now(), names: map[string]bool{}}
}

// enabled says whether the scenario wants bundles.
func (b *bundles) enabled() bool { return b != nil && !b.r.sc.Forensics.Disabled }

// dirName picks forensics/<trigger>-<seconds since load start>s, unique in the run.
func (b *bundles) dirName(trigger string, at time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	name := trigger
	if trigger != "end" {
		name = fmt.Sprintf("%s-%ds", trigger, int(at.Sub(b.t0).Seconds()))
	}
	for i := 2; b.names[name]; i++ {
		name = fmt.Sprintf("%s-%d", strings.TrimSuffix(name, fmt.Sprintf("-%d", i-1)), i)
	}
	b.names[name] = true
	return name
}

// silentDrop is the executor's hook: the first silent drop starts a bundle.
func (b *bundles) silentDrop(id string) {
	if !b.enabled() {
		return
	}
	b.firstDrop.Do(func() { b.async("first-drop", "first silent drop: request "+id) })
}

// async writes a bundle in the background (tracked by wait).
func (b *bundles) async(trigger, reason string) {
	b.wg.Go(func() { b.write(context.Background(), trigger, reason) })
}

// wait waits for the bundles in progress (each is bounded by its own timeout).
func (b *bundles) wait() {
	if b != nil {
		b.wg.Wait()
	}
}

// write collects one bundle now and tells the ledger where it is.
func (b *bundles) write(ctx context.Context, trigger, reason string) {
	r := b.r
	rel := filepath.Join("forensics", b.dirName(trigger, time.Now()))
	m, err := forensics.Write(ctx, filepath.Join(r.opts.OutDir, rel), trigger, reason, r.forensicsSources(), forensics.Config{HTTP: r.hc})
	if err != nil {
		r.log.Warn("forensics bundle", "err", err)
		r.led.Emit(ledger.Event{Type: ledger.EventLog, Message: "forensics bundle " + rel + " failed", Error: err.Error()})
		return
	}
	r.log.Info("forensics bundle written", "dir", rel, "trigger", trigger, "failed", m.Failed())
	r.led.Emit(ledger.Event{Type: ledger.EventNote, Source: "forensics", Detail: rel, Message: m.Note(rel)})
}

// forensicsSources lists what a bundle collects from: the target's debug and metrics
// endpoints, pprof of every reference-server process, and every supervised process.
func (r *runner) forensicsSources() forensics.Sources {
	src := forensics.Sources{LogDir: filepath.Join(r.opts.OutDir, "logs")}
	seen := map[string]bool{}
	var names []string
	addName := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	metrics := map[string]bool{}
	for _, s := range r.tgt.MetricsSources() {
		src.Metrics = append(src.Metrics, forensics.Endpoint(s))
		metrics[s.Process] = true
		addName(s.Process)
	}
	for _, s := range r.tgt.DebugSources() {
		src.Debug = append(src.Debug, forensics.Endpoint(s))
		addName(s.Process)
	}
	launched := map[string]bool{}
	for _, l := range r.sc.Target.Launch {
		launched[l.Name] = true
		addName(l.Name)
	}
	sup, _ := r.tgt.(target.Supervisor)
	for _, n := range names {
		if sup == nil {
			break
		}
		p, err := sup.Process(n)
		if err != nil {
			continue
		}
		src.Processes = append(src.Processes, forensics.Process{Name: n, PID: p.PID})
		if p.URL == "" {
			continue
		}
		if !metrics[n] { // the router's /metrics, which the leak check does not scrape
			src.Metrics = append(src.Metrics, forensics.Endpoint{Process: n, URL: p.URL + "/metrics"})
		}
		// The reference server is Go and serves pprof; a launched process may be
		// anything, and is asked only when it is not Python.
		if !launched[n] || !forensics.IsPython("/proc", p.PID) {
			src.PProf = append(src.PProf, forensics.Endpoint{Process: n, URL: p.URL})
		}
	}
	if sup == nil { // an external target: pprof where its debug endpoint lives
		for _, s := range r.tgt.DebugSources() {
			if u, err := url.Parse(s.URL); err == nil && u.Host != "" {
				src.PProf = append(src.PProf, forensics.Endpoint{Process: s.Process, URL: u.Scheme + "://" + u.Host})
			}
		}
	}
	return src
}

// watchWedge judges the run wedged (forensics.Detector) every second while ctx lasts
// and starts a bundle each time, up to maxWedgeBundles.
func (r *runner) watchWedge(ctx context.Context, b *bundles, every time.Duration) {
	after := r.sc.Forensics.WedgedAfter.D()
	if after <= 0 || !b.enabled() {
		return
	}
	det := &forensics.Detector{After: after}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rd := forensics.Reading{Now: time.Now(), InFlight: int(r.exec.inflight.Load()), Completed: r.exec.completed.Load(),
			GPUIdle: r.gpuIdle()}
		if reason := det.Observe(rd); reason != "" {
			b.mu.Lock()
			ok := b.wedges < maxWedgeBundles
			b.wedges++
			b.mu.Unlock()
			r.led.Emit(ledger.Event{Type: ledger.EventLog, Source: "forensics", InFlight: rd.InFlight, Message: "run judged wedged: " + reason})
			if ok {
				b.async("wedged", reason)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gpuIdle says whether every GPU was idle at the latest GPU sample (nil: unknown, no
// NVML or no sample yet).
func (r *runner) gpuIdle() *bool {
	p := r.lastGPU.Load()
	if p == nil || len(*p) == 0 {
		return nil
	}
	idle := true
	for _, g := range *p {
		if g.Util == nil {
			return nil
		}
		if *g.Util > wedgeIdleUtil {
			idle = false
		}
	}
	return &idle
}

// failures says why the run failed, by the verdict reports gives the ledger written so
// far plus the run's own errors (run_end, which carries them, is not written yet); nil
// when it passes. An unreadable ledger is a reason of its own.
func (r *runner) failures(errs ...error) []string {
	var why []string
	for _, err := range errs {
		if err != nil {
			why = append(why, err.Error())
		}
	}
	if err := r.led.Flush(); err != nil {
		return append(why, err.Error())
	}
	res, err := reports.ComputeFile(filepath.Join(r.opts.OutDir, ledger.EventsFile), judge.ReportConfig(r.sc).WhileRunning())
	if err != nil {
		return append(why, err.Error())
	}
	for _, a := range res.Assertions {
		if a.State != reports.StatePass {
			why = append(why, fmt.Sprintf("%s %s: %s", a.Name, a.State, a.Detail))
		}
	}
	return append(why, res.InvalidReasons...)
}
