package contention

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParsePressure reads the "some" line's total (microseconds during which some runnable
// task waited for a CPU) from /proc/pressure/cpu text:
//
//	some avg10=0.41 avg60=4.97 avg300=8.00 total=73374266
func ParsePressure(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "some" {
			continue
		}
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("contention: pressure line %d: total: %w", line, err)
				}
				return n, nil
			}
		}
		return 0, fmt.Errorf("contention: pressure line %d: no total= field", line)
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("contention: pressure: %w", err)
	}
	return 0, fmt.Errorf("contention: pressure: no \"some\" line")
}

// Stat is what a window needs from /proc/stat: the aggregate CPU line's total and steal
// time (clock ticks) and the runnable task count.
type Stat struct {
	Total, Steal uint64
	ProcsRunning int
}

// ParseStat reads /proc/stat text: the aggregate "cpu" line (user nice system idle iowait
// irq softirq steal guest guest_nice; guest time is already inside user and nice, so it
// is not added again) and procs_running.
func ParseStat(r io.Reader) (Stat, error) {
	var st Stat
	var sawCPU, sawProcs bool
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "cpu":
			if len(fields) < 5 {
				return Stat{}, fmt.Errorf("contention: stat line %d: cpu has %d fields, want at least 4 counters", line, len(fields)-1)
			}
			for i, f := range fields[1:min(len(fields), 9)] { // through steal
				n, err := strconv.ParseUint(f, 10, 64)
				if err != nil {
					return Stat{}, fmt.Errorf("contention: stat line %d: cpu field %d: %w", line, i+1, err)
				}
				st.Total += n
				if i == 7 {
					st.Steal = n
				}
			}
			sawCPU = true
		case "procs_running":
			if len(fields) != 2 {
				return Stat{}, fmt.Errorf("contention: stat line %d: procs_running wants one value", line)
			}
			n, err := strconv.Atoi(fields[1])
			if err != nil || n < 0 {
				return Stat{}, fmt.Errorf("contention: stat line %d: procs_running %q is not a count", line, fields[1])
			}
			st.ProcsRunning, sawProcs = n, true
		}
	}
	if err := sc.Err(); err != nil {
		return Stat{}, fmt.Errorf("contention: stat: %w", err)
	}
	if !sawCPU || !sawProcs {
		return Stat{}, fmt.Errorf("contention: stat: missing the cpu line or procs_running")
	}
	return st, nil
}

// Schedstat is what a window needs from a thread's /proc/<pid>/task/<tid>/schedstat:
// the time it spent runnable but waiting for a CPU (nanoseconds) and the timeslices it
// ran. Their ratio over a window is the mean wait per wake-up.
type Schedstat struct {
	RunDelay, Slices uint64
}

// ParseSchedstat reads schedstat text: three numbers, the time run on a CPU, the time
// waited on a run queue (both nanoseconds) and the timeslices run.
//
//	123456789 2345678 910
func ParseSchedstat(r io.Reader) (Schedstat, error) {
	b, err := io.ReadAll(io.LimitReader(r, 4<<10))
	if err != nil {
		return Schedstat{}, fmt.Errorf("contention: schedstat: %w", err)
	}
	fields := strings.Fields(string(b))
	if len(fields) != 3 {
		return Schedstat{}, fmt.Errorf("contention: schedstat: %d fields, want 3 (run time, run-queue wait, timeslices)", len(fields))
	}
	var v [3]uint64
	for i, f := range fields {
		if v[i], err = strconv.ParseUint(f, 10, 64); err != nil {
			return Schedstat{}, fmt.Errorf("contention: schedstat field %d: %w", i+1, err)
		}
	}
	return Schedstat{RunDelay: v[1], Slices: v[2]}, nil
}
