package benchtable

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// RunLoad is what the machine was doing around one benchmark run: the 1-minute load
// average before and after it, and the CPU time the rest of the machine used while it ran
// (every CPU's busy time in /proc/stat less the benchmark's own process tree). The load
// average includes the benchmark's own threads and decays over a minute, so the
// previous benchmark still shows in the next one's "before"; the others' CPU does not.
type RunLoad struct {
	CPUs       int     // CPUs of the machine (0: unknown)
	Before     float64 // 1-minute load average at the start (NaN: unknown)
	After      float64 // and at the end
	Wall       float64 // seconds the run took
	OwnCPU     float64 // CPU seconds (user + system) of go test and everything it ran
	OthersCPUs float64 // CPUs the rest of the machine used on average during the run (NaN: unknown)
}

// UnderLoad is the rule a figure is marked by: a run is under load when the rest of the
// machine used more than a quarter of its CPUs on average while the run lasted (0.5 CPU
// of 2). Where that is unknown (no /proc/stat), when the load average at the start was
// above half the CPU count.
func (l RunLoad) UnderLoad() bool {
	if l.CPUs <= 0 {
		return false
	}
	if !math.IsNaN(l.OthersCPUs) {
		return l.OthersCPUs > float64(l.CPUs)/4
	}
	return !math.IsNaN(l.Before) && l.Before > float64(l.CPUs)/2
}

// The runner writes one line before and one after each run into the go test output it
// parses (and logs), so that a table built later from bench.log shows the same loads.
const (
	loadBeforePrefix = "benchtable: before "
	loadAfterPrefix  = "benchtable: after "
)

// beforeLine is "benchtable: before cpus=2 loadavg=0.94".
func beforeLine(cpus int, load float64) string {
	return fmt.Sprintf("%scpus=%d loadavg=%s\n", loadBeforePrefix, cpus, fmtNum(load))
}

// afterLine is "benchtable: after loadavg=1.2 wall_s=27.1 cpu_s=12.3 others_cpus=0.03".
func afterLine(l RunLoad) string {
	return fmt.Sprintf("%sloadavg=%s wall_s=%s cpu_s=%s others_cpus=%s\n", loadAfterPrefix,
		fmtNum(l.After), fmtNum(l.Wall), fmtNum(l.OwnCPU), fmtNum(l.OthersCPUs))
}

func fmtNum(v float64) string {
	if math.IsNaN(v) {
		return "?"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// parseLoadFields reads "k=v k=v" into l (loadavg is After on the after line); unknown
// keys and unreadable values are left alone (a value of "?" stays NaN).
func parseLoadFields(s string, l *RunLoad, after bool) {
	for _, kv := range strings.Fields(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if k == "cpus" {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				l.CPUs = n
			}
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			continue
		}
		switch k {
		case "loadavg":
			if after {
				l.After = f
			} else {
				l.Before = f
			}
		case "wall_s":
			l.Wall = f
		case "cpu_s":
			l.OwnCPU = f
		case "others_cpus":
			l.OthersCPUs = f
		}
	}
}

func unknownLoad() RunLoad {
	return RunLoad{Before: math.NaN(), After: math.NaN(), OthersCPUs: math.NaN()}
}

// loadAvg1 is /proc/loadavg's 1-minute figure (NaN where there is none).
func loadAvg1(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// userHZ is the unit of /proc/stat's times (USER_HZ, 100 on every Linux ABI Go supports).
const userHZ = 100

// busySeconds is the machine's CPU time spent on anything but idle, iowait and steal,
// summed over CPUs, from /proc/stat's "cpu" line (ok false where there is none).
func busySeconds(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var busy uint64
	// user nice system idle iowait irq softirq steal ...: guest time is already in user.
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		busy += v
	}
	return float64(busy) / userHZ, true
}

// othersCPUs is the CPUs the rest of the machine used on average over wall: the busy
// time's growth less own CPU time, never below zero (NaN when busy time is unknown).
func othersCPUs(busyBefore, busyAfter float64, known bool, own float64, wall time.Duration) float64 {
	if !known || wall <= 0 {
		return math.NaN()
	}
	return max(0, busyAfter-busyBefore-own) / wall.Seconds()
}
