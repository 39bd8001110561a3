package harness

import (
	"time"

	"pdsoak/harness/contention"
)

// runQueueWait is how long this process's threads have waited on a CPU run queue,
// runnable but not running (Linux's /proc/self/task/*/schedstat, second field), and
// false where that is not available. Over the hold it says whether a lag tail was the
// machine (the harness's threads ready but every core busy with other processes: the
// hold server child, other work) rather than the harness's own scheduling. Threads that
// exited take their share with them, so it is a lower bound.
func runQueueWait() (time.Duration, bool) {
	st, ok := contention.ReadSchedstat("/proc")
	return time.Duration(st.RunDelay), ok
}
