package engine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"pdsoak/server/scheduler"
)

// setStats and setCache skip figures that did not change; the gauges must still show
// the last values published, in the order they were published.
func TestPublishSkipsOnlyUnchangedFigures(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	a := scheduler.Stats{Running: 2, Waiting: 1, UsedPages: 3, TotalPages: 10, PageSize: 4,
		CacheQueriedTokens: 10, CacheHitTokens: 5, GeneratedTokens: 7, DecodeSteps: 1}
	m.setStats(a)
	require.Equal(t, 2.0, testutil.ToFloat64(m.running))
	require.Equal(t, 0.3, testutil.ToFloat64(m.tokenUsage))
	require.Equal(t, 0.5, testutil.ToFloat64(m.cacheHitRate))

	// Fields no gauge shows changed: nothing to write, the values stay.
	b := a
	b.GeneratedTokens, b.DecodeSteps, b.Queued = 99, 9, 4
	m.setStats(b)
	require.Equal(t, 2.0, testutil.ToFloat64(m.running))

	// A shown field changed: written.
	b.Running = 5
	m.setStats(b)
	require.Equal(t, 5.0, testutil.ToFloat64(m.running))

	// The live cache figures, then frozen stats with older cache figures, then the same
	// live figures again: the last writer (live) wins, as without skipping.
	live := scheduler.Stats{CacheQueriedTokens: 10, CacheHitTokens: 9, LockedNodes: 1}
	m.setCache(live)
	require.Equal(t, 0.9, testutil.ToFloat64(m.cacheHitRate))
	b.Running = 6 // frozen stats that still carry the 0.5 hit rate
	m.setStats(b)
	require.Equal(t, 0.5, testutil.ToFloat64(m.cacheHitRate))
	m.setCache(live)
	require.Equal(t, 0.9, testutil.ToFloat64(m.cacheHitRate))
	require.Equal(t, 1.0, testutil.ToFloat64(m.radixLocked))
}
