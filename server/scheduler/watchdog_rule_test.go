package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestWatchdogErr: the one watchdog health rule (Scheduler.Health and engine.Healthy).
func TestWatchdogErr(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	const wd = 2 * time.Second
	for _, tc := range []struct {
		name string
		sem  Semantics
		wd   time.Duration
		w    Watch
		want string // "" : healthy
	}{
		{"off", SemanticsStrict, 0, Watch{Step: ago(time.Hour), Live: 3}, ""},
		{"strict idle", SemanticsStrict, wd, Watch{Progress: ago(time.Hour)}, ""},
		{"strict live, progressing", SemanticsStrict, wd, Watch{Progress: ago(time.Second), Live: 2}, ""},
		{"strict live, stalled", SemanticsStrict, wd, Watch{Progress: ago(3 * time.Second), Live: 2},
			"scheduler: watchdog: no progress for 3s with 2 requests in flight"},
		{"strict step not returned", SemanticsStrict, wd, Watch{Step: ago(wd), Progress: now},
			"scheduler: watchdog: a step has not returned for 2s"},
		{"strict short step", SemanticsStrict, wd, Watch{Step: ago(time.Second), Progress: now, Live: 1}, ""},
		{"sglang stalled queue is not its business", SemanticsSGLang, wd, Watch{Progress: ago(time.Hour), Live: 5}, ""},
		{"sglang long step with output", SemanticsSGLang, wd, Watch{Step: ago(time.Hour), Output: ago(time.Second)}, ""},
		{"sglang long step, no output", SemanticsSGLang, wd, Watch{Step: ago(5 * time.Second), Output: ago(5 * time.Second)},
			"scheduler: watchdog: a step has run for 5s"},
	} {
		err := WatchdogErr(tc.sem, tc.wd, now, tc.w)
		if tc.want == "" {
			assert.NoError(t, err, tc.name)
		} else if assert.Error(t, err, tc.name) {
			assert.Equal(t, tc.want, err.Error(), tc.name)
		}
	}
}
