package harness

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/judge"
	"pdsoak/harness/phases"
	"pdsoak/harness/target"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// urlTarget is an external target at url.
type urlTarget struct{ url string }

func (u urlTarget) URL() string                   { return u.url }
func (urlTarget) MetricsSources() []target.Source { return nil }
func (urlTarget) DebugSources() []target.Source   { return nil }
func (urlTarget) Stop(context.Context) error      { return nil }

// probeRun runs the prober against url until until(ev) says so, then stops it and
// returns the ledger.
func probeRun(t *testing.T, url string, until func(ledger.Event) bool) []ledger.Event {
	t.Helper()
	dir := t.TempDir()
	done := make(chan struct{})
	var closed atomic.Bool
	led, err := ledger.Create(filepath.Join(dir, ledger.EventsFile), func(ev ledger.Event) {
		if until(ev) && closed.CompareAndSwap(false, true) {
			close(done)
		}
	})
	require.NoError(t, err)
	r := &runner{sc: &scenarios.Scenario{Target: scenarios.Target{URL: url}}, opts: Options{LivenessInterval: 10 * time.Millisecond},
		log: slog.New(slog.DiscardHandler), led: led, hc: &http.Client{}, tgt: urlTarget{url}}
	p := r.startProbes(context.Background())
	<-done
	p.stop()
	require.NoError(t, led.Close())
	return readLedger(t, dir)
}

// One prober: each GET of the entry's /health is one health event (and a liveness
// observation), so the entry is asked once per interval, not once per record.
func TestOneProbeFeedsHealthAndLiveness(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			hits.Add(1)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var n atomic.Int64
	evs := probeRun(t, srv.URL, func(ev ledger.Event) bool { return ev.Type == ledger.EventHealth && n.Add(1) >= 20 })
	health := eventsOf(evs, ledger.EventHealth)
	require.GreaterOrEqual(t, len(health), 20)
	for _, ev := range health {
		assert.Equal(t, "target", ev.Source)
		assert.Equal(t, srv.URL+"/health", ev.URL)
		assert.Equal(t, http.StatusServiceUnavailable, ev.Status, "a 503 is recorded as it came")
	}
	// Every hit was a health event but at most one (a probe cut short by the stop).
	got := hits.Load()
	assert.GreaterOrEqual(t, got, int64(len(health)))
	assert.LessOrEqual(t, got, int64(len(health)+1), "%d hits for %d health events: a second prober?", got, len(health))
	assert.Empty(t, eventsOf(evs, ledger.EventTargetDown), "a 503 is an answer: the target is alive")
}

// A target that is gone: the same failed probes are health events with an error and,
// judge.LivenessFailures of them in a row, target_down.
func TestOneProbeSeesTheTargetDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	evs := probeRun(t, url, func(ev ledger.Event) bool { return ev.Type == ledger.EventTargetDown })
	down := only(t, evs, ledger.EventTargetDown)
	assert.Equal(t, "target", down.Source)
	var before []ledger.Event // in ledger order, up to the target_down
	for _, ev := range evs {
		if ev.Type == ledger.EventTargetDown {
			break
		}
		if ev.Type == ledger.EventHealth {
			before = append(before, ev)
		}
	}
	require.Len(t, before, judge.LivenessFailures, "each failed probe is one health event")
	for _, ev := range before {
		assert.Zero(t, ev.Status)
		assert.NotEmpty(t, ev.Error)
	}
}

// A /health that hangs is a failed health probe once phases.HealthTimeout passes, even though
// liveness (which waits longer) has not called it dead.
func TestHangingHealthIsAFailedProbe(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			return // the final tries' probes, once the prober has stopped: it lives
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	evs := probeRun(t, srv.URL, func(ev ledger.Event) bool { return ev.Type == ledger.EventHealth })
	h := eventsOf(evs, ledger.EventHealth)
	require.NotEmpty(t, h)
	assert.Zero(t, h[0].Status)
	assert.Equal(t, phases.ErrHealthTimeout.Error(), h[0].Error)
	assert.Empty(t, eventsOf(evs, ledger.EventTargetDown))
}
