package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procCost is what a process has used so far: CPU time (user+system, all threads) and
// context switches summed over its threads. Both move far less with the machine's load
// than wall time does, so the benchmarks report them per request next to their figures.
type procCost struct {
	cpu         time.Duration
	vol, nonvol int64
	threads     int
	readOK      bool
}

// readCost reads pid's cost from /proc (Linux; zero elsewhere). Context switches are
// per thread in /proc/PID/task/TID/status; threads that already exited are not counted
// (Go rarely ends an OS thread).
func readCost(pid int) procCost {
	c := procCost{cpu: pidCPU(pid)}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		return c
	}
	c.readOK = true
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		c.threads++
		for _, line := range bytes.Split(b, []byte("\n")) {
			name, val, ok := strings.Cut(string(line), ":")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
			if err != nil {
				continue
			}
			switch name {
			case "voluntary_ctxt_switches":
				c.vol += n
			case "nonvoluntary_ctxt_switches":
				c.nonvol += n
			}
		}
	}
	return c
}

// costMeter measures named processes over a stretch of requests.
type costMeter struct {
	pids   map[string]int
	before map[string]procCost
	urls   map[string]string     // base URLs whose /metrics count GC cycles
	gcs    map[string][2]float64 // gcCount before
}

func newCostMeter(pids map[string]int) *costMeter {
	m := &costMeter{pids: pids, before: map[string]procCost{}}
	for name, pid := range pids {
		m.before[name] = readCost(pid)
	}
	return m
}

// countGC makes report add <name>_gc/kreq, the Go GC cycles per 1,000 requests, and
// <name>_alloc_kb/req, the heap allocated per request, of each process of urls (a GC
// cycle on a process with one P runs on the requests' thread).
func (m *costMeter) countGC(urls map[string]string) {
	m.urls, m.gcs = urls, map[string][2]float64{}
	for name, u := range urls {
		m.gcs[name] = gcCount(u)
	}
}

// gcCount is go_gc_duration_seconds_count and go_memstats_alloc_bytes_total from url's
// /metrics (-1 when unreadable).
func gcCount(url string) [2]float64 {
	out := [2]float64{-1, -1}
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		for i, name := range []string{"go_gc_duration_seconds_count ", "go_memstats_alloc_bytes_total "} {
			if v, ok := strings.CutPrefix(line, name); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					out[i] = f
				}
			}
		}
	}
	return out
}

// topologyPIDs names topo's processes by role (router, prefill, decode).
func topologyPIDs(topo *Topology) map[string]int {
	out := map[string]int{}
	for _, p := range topo.Processes() {
		out[strings.SplitN(p.Name, "-", 2)[0]] = p.PID
	}
	return out
}

// report adds, for each process, <name>_cpu_us/req, <name>_ctxsw/req (voluntary
// context switches of all its threads: a thread that blocked, to be woken later, which
// is what a goroutine hand-off costs when it crosses threads) and <name>_preempt/req
// (involuntary ones: the machine's other load) over n requests, and the PD totals.
func (m *costMeter) report(b *testing.B, n int) {
	if n == 0 {
		return
	}
	var pdCPU time.Duration
	var pdSw, pdPre int64
	pd := false
	for name, pid := range m.pids {
		a, z := m.before[name], readCost(pid)
		if !a.readOK || !z.readOK {
			continue
		}
		cpu, sw, pre := z.cpu-a.cpu, z.vol-a.vol, z.nonvol-a.nonvol
		b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(n), name+"_cpu_us/req")
		b.ReportMetric(float64(sw)/float64(n), name+"_ctxsw/req")
		b.ReportMetric(float64(pre)/float64(n), name+"_preempt/req")
		if name == RoleRouter || name == RolePrefill || name == RoleDecode {
			pdCPU += cpu
			pdSw += sw
			pdPre += pre
			pd = true
		}
	}
	for name, u := range m.urls {
		a, z := m.gcs[name], gcCount(u)
		if a[0] >= 0 && z[0] >= 0 {
			b.ReportMetric((z[0]-a[0])*1000/float64(n), name+"_gc/kreq")
		}
		if a[1] >= 0 && z[1] >= 0 {
			b.ReportMetric((z[1]-a[1])/1024/float64(n), name+"_alloc_kb/req")
		}
	}
	if !pd {
		return
	}
	b.ReportMetric(float64(pdCPU)/float64(time.Microsecond)/float64(n), "pd_cpu_us/req")
	b.ReportMetric(float64(pdSw)/float64(n), "pd_ctxsw/req")
	b.ReportMetric(float64(pdPre)/float64(n), "pd_preempt/req")
}

// straceProcesses, when PDSOAK_BENCH_STRACE names a directory, attaches `strace -c -f`
// to each named process, runs n rounds of load, detaches and writes DIR/NAME.strace:
// the system calls of n requests per process (divide the counts by n). Not a figure: a
// tool for counting system calls per request (strace slows everything it traces).
func straceProcesses(b *testing.B, pids map[string]int, n int, load func() error) {
	dir := os.Getenv("PDSOAK_BENCH_STRACE")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var cmds []*exec.Cmd
	for name, pid := range pids {
		cmd := exec.Command("strace", "-c", "-f", "-o", filepath.Join(dir, name+".strace"), "-p", strconv.Itoa(pid))
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	time.Sleep(time.Second) // attaching to every thread takes a moment; not a measurement
	for i := 0; i < n; i++ {
		if err := load(); err != nil {
			b.Fatal(err)
		}
	}
	for _, cmd := range cmds {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
}
