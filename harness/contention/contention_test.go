package contention

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pdsoak/ledger"
)

const procStat = `cpu  22764 0 7695 121637 452 0 187 2072 0 0
cpu0 11000 0 3800 60000 200 0 90 1000 0 0
intr 1 2 3
procs_running 6
procs_blocked 0
`

func TestParseStat(t *testing.T) {
	st, err := ParseStat(strings.NewReader(procStat))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{Total: 22764 + 7695 + 121637 + 452 + 187 + 2072, Steal: 2072, ProcsRunning: 6}
	if st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
}

func TestParseStatErrors(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "missing the cpu line"},
		{"no procs", "cpu 1 2 3 4\n", "missing"},
		{"bad counter", "cpu 1 x 3 4\nprocs_running 1\n", "line 1: cpu field 2"},
		{"short cpu", "cpu 1 2\nprocs_running 1\n", "line 1: cpu has 2 fields"},
		{"bad procs", "cpu 1 2 3 4\nprocs_running -3\n", "line 2: procs_running"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStat(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "contention: ") {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParsePressure(t *testing.T) {
	got, err := ParsePressure(strings.NewReader("some avg10=0.41 avg60=4.97 avg300=8.00 total=73374266\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	if err != nil || got != 73374266 {
		t.Fatalf("got %d, %v", got, err)
	}
	for _, bad := range []string{"", "full total=3\n", "some avg10=1\n", "some total=x\n"} {
		if _, err := ParsePressure(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add(procStat)
	f.Add("cpu 1 2 3 4\nprocs_running 1\n")
	f.Add("cpu 18446744073709551615 1 1 1 1 1 1 1\nprocs_running 0")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStat(strings.NewReader(s))
		if err == nil && st.ProcsRunning < 0 {
			t.Fatalf("negative procs_running from %q", s)
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	f.Add("some avg10=0.41 avg60=4.97 avg300=8.00 total=73374266\n")
	f.Add("full total=1\nsome total=2")
	f.Fuzz(func(t *testing.T, s string) { _, _ = ParsePressure(strings.NewReader(s)) })
}

func TestParseSchedstat(t *testing.T) {
	st, err := ParseSchedstat(strings.NewReader("123456789 2345678 910\n"))
	if err != nil || st != (Schedstat{RunDelay: 2345678, Slices: 910}) {
		t.Fatalf("got %+v, %v", st, err)
	}
	for _, bad := range []string{"", "1 2", "1 2 3 4", "1 -2 3", "a b c", "1 2 18446744073709551616"} {
		if _, err := ParseSchedstat(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseSchedstat(f *testing.F) {
	f.Add("123456789 2345678 910\n")
	f.Add("0 0 0")
	f.Add("1 2")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseSchedstat(strings.NewReader(s))
		if err != nil && st != (Schedstat{}) {
			t.Fatalf("%q: error %v with a value %+v", s, err, st)
		}
	})
}

func TestWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := Reading{At: t0, Pressure: 1_000_000, HasPressure: true, Stat: Stat{Total: 1000, Steal: 10}, HasStat: true, CPU: time.Second,
		Sched: Schedstat{RunDelay: 5_000_000, Slices: 1000}, HasSched: true}
	cur := Reading{At: t0.Add(2 * time.Second), Pressure: 1_500_000, HasPressure: true, Stat: Stat{Total: 1400, Steal: 50, ProcsRunning: 5}, HasStat: true, CPU: 2 * time.Second,
		Sched: Schedstat{RunDelay: 9_000_000, Slices: 1100}, HasSched: true}
	m := Window(prev, cur, 2, 30*time.Millisecond)
	want := map[string]float64{
		ledger.ContentionCPUPressure: 0.25, // 0.5 s of 2 s
		ledger.ContentionSteal:       0.1,  // 40 of 400 ticks
		ledger.ContentionRunQueue:    2.5,
		ledger.ContentionHarnessCPU:  0.5,
		ledger.ContentionTickLag:     0.03,
		ledger.ContentionRunDelay:    40e-6, // 4 ms waited over 100 timeslices
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got < v-1e-9 || got > v+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// No PSI, and a counter that went backwards: left out, not negative.
	cur.HasPressure = false
	cur.Stat.Steal = 5
	cur.Sched.RunDelay = 1 // a thread with a long wait exited
	m = Window(prev, cur, 2, -time.Second)
	if _, ok := m[ledger.ContentionCPUPressure]; ok {
		t.Error("pressure without PSI")
	}
	if _, ok := m[ledger.ContentionSteal]; ok {
		t.Error("steal from a counter that went backwards")
	}
	if _, ok := m[ledger.ContentionRunDelay]; ok {
		t.Error("run delay from a sum that went backwards")
	}
	cur.Sched = prev.Sched // no timeslice ran: nothing to divide by
	if _, ok := Window(prev, cur, 2, 0)[ledger.ContentionRunDelay]; ok {
		t.Error("run delay without a timeslice")
	}
	if m[ledger.ContentionTickLag] != 0 {
		t.Error("negative lag not clamped")
	}
}

// TestSamplerRun runs the real driver over a fake /proc whose counters advance on every
// read: each sample carries every metric, with the source the reports look for.
func TestSamplerRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pressure"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tid := range []string{"10", "11"} {
		if err := os.MkdirAll(filepath.Join(dir, "self", "task", tid), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(n int) {
		for _, tid := range []string{"10", "11"} { // each thread: 50 µs waited per timeslice
			sched := strconv.Itoa(n*1_000_000) + " " + strconv.Itoa(n*500_000) + " " + strconv.Itoa(n*10) + "\n"
			if err := os.WriteFile(filepath.Join(dir, "self", "task", tid, "schedstat"), []byte(sched), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		psi := "some avg10=0 avg60=0 avg300=0 total=" + strconv.Itoa(n*100_000) + "\nfull total=0\n"
		stat := "cpu " + strconv.Itoa(n*100) + " 0 0 " + strconv.Itoa(n*100) + " 0 0 0 " + strconv.Itoa(n*10) + " 0 0\nprocs_running 3\n"
		if err := os.WriteFile(filepath.Join(dir, "pressure", "cpu"), []byte(psi), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	var mu sync.Mutex
	var got []ledger.Event
	ctx, cancel := context.WithCancel(context.Background())
	n, clock := 1, time.Unix(0, 0)
	s := New(func(e ledger.Event) {
		mu.Lock()
		got = append(got, e)
		if len(got) == 3 {
			cancel()
		}
		mu.Unlock()
	}, WithProcRoot(dir), WithInterval(time.Millisecond), WithCPUs(2),
		WithClock(func() time.Time { clock = clock.Add(time.Second); n++; write(n); return clock }),
		WithCPUTime(func() time.Duration { return time.Duration(n) * 100 * time.Millisecond }))
	s.Run(ctx)
	if len(got) < 3 {
		t.Fatalf("%d samples", len(got))
	}
	for _, e := range got {
		if e.Type != ledger.EventSample || e.Source != ledger.ContentionSource {
			t.Fatalf("event %+v", e)
		}
		for _, k := range []string{ledger.ContentionCPUPressure, ledger.ContentionSteal, ledger.ContentionRunQueue, ledger.ContentionHarnessCPU, ledger.ContentionTickLag, ledger.ContentionRunDelay} {
			if _, ok := e.Metrics[k]; !ok {
				t.Fatalf("sample lacks %s: %v", k, e.Metrics)
			}
		}
		if e.Metrics[ledger.ContentionRunQueue] != 1.5 {
			t.Errorf("run queue %v, want 3 tasks / 2 CPUs", e.Metrics[ledger.ContentionRunQueue])
		}
		if d := e.Metrics[ledger.ContentionRunDelay]; d < 50e-6-1e-12 || d > 50e-6+1e-12 {
			t.Errorf("run delay %v, want 50µs per timeslice summed over both threads", d)
		}
	}
}

// TestRunDelaySeesBusyThreads reads the real /proc: while this process runs three
// spinning OS threads per CPU, each of its threads waits for a CPU about a timeslice
// every time it becomes runnable, far above what compare tolerates (100 µs); a machine
// that does this to the harness moves every latency the run measures.
func TestRunDelaySeesBusyThreads(t *testing.T) {
	s := New(func(ledger.Event) {})
	before := s.Read()
	if !before.HasSched {
		t.Skip("no /proc/self/task/*/schedstat on this kernel: the metric is left out")
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 3 * runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // a thread of its own, as a busy neighbour's would be
			defer runtime.UnlockOSThread()
			for !stop.Load() { // spin: the point is to keep a CPU busy
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	after := s.Read()
	d, ok := Window(before, after, runtime.NumCPU(), 0)[ledger.ContentionRunDelay]
	if !ok {
		t.Fatalf("no run delay from %+v → %+v", before.Sched, after.Sched)
	}
	if d < 100e-6 {
		t.Errorf("run delay %v per timeslice with %d spinning threads on %d CPUs, want well above 100µs", time.Duration(d*1e9), 3*runtime.NumCPU(), runtime.NumCPU())
	}
	t.Logf("run delay %v per timeslice", time.Duration(d*1e9))
}
