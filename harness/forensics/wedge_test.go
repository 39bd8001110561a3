package forensics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDetector(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	yes, no := true, false
	type obs struct {
		s         int
		inflight  int
		completed int64
		idle      *bool
		fires     bool
	}
	tests := []struct {
		name string
		obs  []obs
	}{
		{"stuck past the bound fires once", []obs{
			{0, 4, 10, nil, false}, {29, 4, 10, nil, false}, {30, 4, 10, nil, true}, {31, 4, 10, nil, false}, {90, 4, 10, nil, false}}},
		{"progress re-arms", []obs{
			{0, 4, 10, nil, false}, {30, 4, 10, nil, true}, {31, 4, 11, nil, false}, {60, 4, 11, nil, false}, {61, 4, 11, nil, true}}},
		{"nothing in flight is idle, not wedged", []obs{
			{0, 0, 10, nil, false}, {40, 0, 10, nil, false}, {80, 0, 10, nil, false}}},
		{"busy GPUs hold it back", []obs{
			{0, 2, 5, &no, false}, {40, 2, 5, &no, false}, {41, 2, 5, &yes, true}}},
		{"idle GPUs confirm", []obs{
			{0, 2, 5, &yes, false}, {30, 2, 5, &yes, true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &Detector{After: 30 * time.Second}
			for _, o := range tc.obs {
				reason := d.Observe(Reading{Now: at(o.s), InFlight: o.inflight, Completed: o.completed, GPUIdle: o.idle})
				assert.Equal(t, o.fires, reason != "", "at %ds: reason %q", o.s, reason)
				if o.fires {
					assert.Contains(t, reason, "none completed for")
				}
			}
		})
	}
}

func TestDetectorOff(t *testing.T) {
	d := &Detector{}
	t0 := time.Now()
	for s := range 100 {
		assert.Empty(t, d.Observe(Reading{Now: t0.Add(time.Duration(s) * time.Minute), InFlight: 3}))
	}
}
