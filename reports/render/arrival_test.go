package render

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/reports"
)

// TestArrivalsMarkdown: summary.md's section lists each trace workload's buckets, and
// is absent without one.
func TestArrivalsMarkdown(t *testing.T) {
	r := &reports.Results{Arrivals: []reports.ArrivalCurve{{Workload: "tr|x", BucketSeconds: 1,
		Scheduled: []int{2, 0, 1}, Sent: []int{1, 1, 1}, MaxLagSeconds: 0.4}}}
	assert.Contains(t, arrivalsMarkdown(r), `| tr\|x | 1 | 2 0 1 | 1 1 1 | 0.400 |`)
	assert.Empty(t, arrivalsMarkdown(&reports.Results{}))
}
