package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriterConcurrentEmit(t *testing.T) {
	path := filepath.Join(t.TempDir(), EventsFile)
	var seen atomic.Int64
	w, err := Create(path, func(Event) { seen.Add(1) })
	require.NoError(t, err)

	const goroutines, each = 16, 100
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Large enough events that a torn interleaving would break a line.
				w.Emit(Event{Type: EventDone, RequestID: fmt.Sprintf("g%d-%d", g, i), Outcome: OutcomeOK,
					ITL: make([]float64, 64), Detail: fmt.Sprintf("%0512d", i)})
			}
		}()
	}
	wg.Wait()
	require.NoError(t, w.Close())

	evs, st, err := ReadFile(path)
	require.NoError(t, err, "every line decodes")
	assert.False(t, st.Torn)
	require.Len(t, evs, goroutines*each, "Close flushed every event")
	assert.Equal(t, int64(goroutines*each), seen.Load(), "onEvent saw every event")
	ids := map[string]bool{}
	for _, e := range evs {
		assert.False(t, e.Time.IsZero(), "Emit stamps the time")
		ids[e.RequestID] = true
	}
	assert.Len(t, ids, goroutines*each, "no event lost or duplicated")
}

func TestWriterAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), EventsFile)
	var seen atomic.Int64
	w, err := Create(path, func(Event) { seen.Add(1) })
	require.NoError(t, err)
	w.Emit(Event{Type: EventRunStart, Scenario: "s"})
	require.NoError(t, w.Close())
	w.Emit(Event{Type: EventRunEnd}) // dropped, no panic
	require.NoError(t, w.Close(), "a second Close is harmless")

	evs, _, err := ReadFile(path)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, EventRunStart, evs[0].Type)
	assert.Equal(t, int64(1), seen.Load(), "a dropped event does not reach onEvent")
}

func TestWriterCreateError(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "missing", EventsFile), nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "ledger: ")
}

// A ledger that cannot be written says so at once (Failed, Err), so the run can stop
// rather than drive load nobody can judge. /dev/full refuses every write with ENOSPC, as
// a full disk does.
func TestWriterFailedOnFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("SKIPPED, not passed: no /dev/full here (%v)", err)
	}
	w, err := Create("/dev/full", nil)
	require.NoError(t, err)
	select {
	case <-w.Failed():
		t.Fatal("failed before anything was written")
	default:
	}
	require.NoError(t, w.Err())
	w.Emit(Event{Type: EventNote, Message: "lost"})
	require.Error(t, w.Flush())
	select {
	case <-w.Failed():
	default:
		t.Fatal("Failed not closed after a failed write")
	}
	assert.ErrorContains(t, w.Err(), "no space left on device")
	w.Emit(Event{Type: EventNote, Message: "also lost"}) // no second close of Failed
	assert.Error(t, w.Close())
}
