package harness

import (
	"runtime"
	"testing"
)

// TestRunQueueWait: on Linux the hold's run-queue figure is read (not silently zero for
// want of the file) and never goes backwards.
func TestRunQueueWait(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("schedstat is Linux's")
	}
	a, ok := runQueueWait()
	if !ok {
		t.Skip("no /proc/self/task/*/schedstat (kernel without CONFIG_SCHEDSTATS)")
	}
	b, ok := runQueueWait()
	if !ok || b < a || a < 0 {
		t.Fatalf("runQueueWait: %v then %v (ok %v)", a, b, ok)
	}
}
