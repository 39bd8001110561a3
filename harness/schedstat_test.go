package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runQueueWait is how long this process's threads have waited on a CPU run queue,
// runnable but not running (Linux's /proc/self/task/*/schedstat, second field), and
// false where that is not available. Over the hold it says whether a lag tail was the
// machine (the harness's threads ready but every core busy with other processes: the
// hold server child, other work) rather than the harness's own scheduling. Threads that
// exited take their share with them, so it is a lower bound.
func runQueueWait() (time.Duration, bool) {
	paths, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil || len(paths) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += time.Duration(ns)
	}
	return sum, true
}
