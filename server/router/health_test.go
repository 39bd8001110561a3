package router

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHealth walks the health tracker through the transitions the Router and the
// simulator both rely on.
func TestHealthTracker(t *testing.T) {
	type step struct {
		op      string // "ok", "fail", "down"
		changed bool
		healthy bool
		fails   int
	}
	tests := []struct {
		name  string
		start Health
		steps []step
	}{
		{"starts unhealthy, one pass brings it up", Health{}, []step{
			{"fail", false, false, 1}, {"ok", true, true, 0}, {"ok", false, true, 0}}},
		{"threshold failures in a row mark it down", Health{Healthy: true}, []step{
			{"fail", false, true, 1}, {"ok", false, true, 0}, {"fail", false, true, 1}, {"fail", true, false, 2},
			{"fail", false, false, 3}, {"ok", true, true, 0}}},
		{"a transport error marks it down at once", Health{Healthy: true}, []step{
			{"down", true, false, 2}, {"down", false, false, 2}, {"fail", false, false, 3}, {"ok", true, true, 0}}},
		{"mark down keeps a higher count", Health{Healthy: false, Fails: 5}, []step{
			{"down", false, false, 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.start
			for i, s := range tt.steps {
				var changed bool
				switch s.op {
				case "ok":
					changed = h.Checked(true, 2)
				case "fail":
					changed = h.Checked(false, 2)
				case "down":
					changed = h.MarkDown(2)
				}
				assert.Equal(t, s.changed, changed, "step %d (%s): changed", i, s.op)
				assert.Equal(t, Health{Healthy: s.healthy, Fails: s.fails}, h, "step %d (%s)", i, s.op)
			}
		})
	}
}
