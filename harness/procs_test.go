package harness

import (
	"runtime"
	"testing"
)

func TestSetProcsRestores(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	restore := setProcs(1)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d after setProcs(1)", got)
	}
	restore()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after restore, want %d", got, before)
	}
	setProcs(0)()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("setProcs(0) changed GOMAXPROCS to %d", got)
	}
}
