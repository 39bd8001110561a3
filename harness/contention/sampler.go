package contention

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"pdsoak/ledger"
)

// DefaultInterval is the window when WithInterval is not given.
const DefaultInterval = 2 * time.Second

// Reading is one look at the machine.
type Reading struct {
	At time.Time
	// Pressure is /proc/pressure/cpu's "some" total in microseconds (HasPressure: the
	// kernel has PSI).
	Pressure    uint64
	HasPressure bool
	Stat        Stat
	HasStat     bool
	// CPU is the harness process's user + system time so far.
	CPU time.Duration
	// Sched sums the harness's threads' schedstat (HasSched: the kernel has it).
	Sched    Schedstat
	HasSched bool
}

// Window is the contention between two readings, as a sample's metrics (pure). cpus is
// the machine's CPU count; lag how late the tick that took cur fired. A metric whose
// readings are missing, or that went backwards (a counter reset), is left out.
func Window(prev, cur Reading, cpus int, lag time.Duration) map[string]float64 {
	m := map[string]float64{ledger.ContentionTickLag: max(lag, 0).Seconds()}
	wall := cur.At.Sub(prev.At)
	if wall <= 0 {
		return m
	}
	if prev.HasPressure && cur.HasPressure && cur.Pressure >= prev.Pressure {
		m[ledger.ContentionCPUPressure] = clamp01(float64(cur.Pressure-prev.Pressure) / float64(wall.Microseconds()))
	}
	if prev.HasStat && cur.HasStat && cur.Stat.Total > prev.Stat.Total && cur.Stat.Steal >= prev.Stat.Steal {
		m[ledger.ContentionSteal] = clamp01(float64(cur.Stat.Steal-prev.Stat.Steal) / float64(cur.Stat.Total-prev.Stat.Total))
	}
	if cur.HasStat && cpus > 0 {
		m[ledger.ContentionRunQueue] = float64(cur.Stat.ProcsRunning) / float64(cpus)
	}
	if prev.HasSched && cur.HasSched && cur.Sched.Slices > prev.Sched.Slices && cur.Sched.RunDelay >= prev.Sched.RunDelay {
		m[ledger.ContentionRunDelay] = float64(cur.Sched.RunDelay-prev.Sched.RunDelay) / float64(cur.Sched.Slices-prev.Sched.Slices) / 1e9
	}
	if cur.CPU >= prev.CPU {
		m[ledger.ContentionHarnessCPU] = (cur.CPU - prev.CPU).Seconds() / wall.Seconds()
	}
	return m
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }

// Sampler emits one contention sample per window.
type Sampler struct {
	emit     func(ledger.Event)
	interval time.Duration
	now      func() time.Time
	procRoot string
	cpuTime  func() time.Duration
	cpus     int
}

// Option configures a Sampler.
type Option func(*Sampler)

// WithInterval sets the window (DefaultInterval).
func WithInterval(d time.Duration) Option { return func(s *Sampler) { s.interval = d } }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(s *Sampler) { s.now = now } }

// WithProcRoot reads pressure/cpu and stat under dir instead of /proc.
func WithProcRoot(dir string) Option { return func(s *Sampler) { s.procRoot = dir } }

// WithCPUTime replaces the process's own CPU time (getrusage).
func WithCPUTime(f func() time.Duration) Option { return func(s *Sampler) { s.cpuTime = f } }

// WithCPUs sets the CPU count the run queue is divided by (runtime.NumCPU).
func WithCPUs(n int) Option { return func(s *Sampler) { s.cpus = n } }

// New returns a Sampler that hands each sample to emit (a ledger writer's Emit).
func New(emit func(ledger.Event), opts ...Option) *Sampler {
	s := &Sampler{emit: emit, interval: DefaultInterval, now: time.Now, procRoot: "/proc",
		cpuTime: processCPU, cpus: runtime.NumCPU()}
	for _, o := range opts {
		o(s)
	}
	if s.interval <= 0 {
		s.interval = DefaultInterval
	}
	return s
}

// Read takes one reading. Unreadable or malformed files leave their part out.
func (s *Sampler) Read() Reading {
	r := Reading{At: s.now(), CPU: s.cpuTime()}
	if data, err := os.ReadFile(filepath.Join(s.procRoot, "pressure", "cpu")); err == nil {
		if p, err := ParsePressure(bytes.NewReader(data)); err == nil {
			r.Pressure, r.HasPressure = p, true
		}
	}
	if data, err := os.ReadFile(filepath.Join(s.procRoot, "stat")); err == nil {
		if st, err := ParseStat(bytes.NewReader(data)); err == nil {
			r.Stat, r.HasStat = st, true
		}
	}
	r.Sched, r.HasSched = ReadSchedstat(s.procRoot)
	return r
}

// ReadSchedstat sums schedstat over this process's threads under procRoot ("/proc"),
// and false where the kernel has none. A thread that exits between the listing and the
// read is skipped; one that exited within a window takes its share with it, and a sum
// that went backwards leaves the window's figure out (Window).
func ReadSchedstat(procRoot string) (Schedstat, bool) {
	paths, err := filepath.Glob(filepath.Join(procRoot, "self", "task", "*", "schedstat"))
	if err != nil || len(paths) == 0 {
		return Schedstat{}, false
	}
	var sum Schedstat
	read := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		st, err := ParseSchedstat(bytes.NewReader(data))
		if err != nil {
			return Schedstat{}, false
		}
		sum.RunDelay += st.RunDelay
		sum.Slices += st.Slices
		read++
	}
	return sum, read > 0
}

// Run samples every interval until ctx ends, then emits the last, partial window, and
// returns. The tick lag of a window is how much later than planned its tick fired.
func (s *Sampler) Run(ctx context.Context) {
	prev := s.Read()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	next := prev.At.Add(s.interval)
	for {
		select {
		case <-ctx.Done():
			cur := s.Read()
			if cur.At.Sub(prev.At) >= s.interval/4 { // a stub window says little
				s.sample(prev, cur, 0)
			}
			return
		case <-t.C:
			cur := s.Read()
			s.sample(prev, cur, cur.At.Sub(next))
			prev = cur
			// A late tick moves the plan on; lost ticks are not counted twice.
			for !next.After(cur.At) {
				next = next.Add(s.interval)
			}
		}
	}
}

func (s *Sampler) sample(prev, cur Reading, lag time.Duration) {
	s.emit(ledger.Event{Time: cur.At, Type: ledger.EventSample, Source: ledger.ContentionSource,
		Metrics: Window(prev, cur, s.cpus, lag)})
}

// processCPU is this process's user + system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
