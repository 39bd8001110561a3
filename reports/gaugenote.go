package reports

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"pdsoak/reports/internal/format"
)

// stageGauges maps a /debug/requests stage to the gauge that counts requests in it
// (SGLang's names, which the reference server keeps).
var stageGauges = map[string]string{
	"prealloc":  "sglang:num_decode_prealloc_queue_reqs",
	"transfer":  "sglang:num_decode_transfer_queue_reqs",
	"bootstrap": "sglang:num_prefill_prealloc_queue_reqs",
	"waiting":   "sglang:num_queue_reqs",
	"running":   "sglang:num_running_reqs",
	"retracted": "sglang:num_retracted_reqs",
}

// gaugeStaleness is how old the last sample before a drop may be and still be compared
// with what /debug/requests said then.
const gaugeStaleness = 10 * time.Second

// heldSeen is one process's stage for one drop, when the harness asked.
type heldSeen struct {
	h  held
	at time.Time
}

// maxHeldSeen bounds the drops remembered for the gauge comparison.
const maxHeldSeen = 10_000

// gaugeNote says where a gauge read 0 while /debug/requests held dropped requests in
// the stage it counts ("" when they agree): SGLang refreshes decode gauges only after
// forward steps, so an idle decode's gauges freeze, and a chart of them would read as
// an empty queue.
func gaugeNote(metric string, raw map[string][]rawPoint, seen []heldSeen) string {
	disagree := map[string]int{}
	for _, s := range seen {
		if stageGauges[s.h.stage] != metric {
			continue
		}
		pts := raw[s.h.process]
		at := s.at.UnixNano()
		i := sort.Search(len(pts), func(i int) bool { return pts[i].at > at }) - 1
		if i < 0 || at-pts[i].at > int64(gaugeStaleness) || pts[i].v != 0 {
			continue
		}
		disagree[s.h.process]++
	}
	if len(disagree) == 0 {
		return ""
	}
	parts := make([]string, 0, len(disagree))
	for _, p := range format.SortedKeys(disagree) {
		parts = append(parts, fmt.Sprintf("%s read 0 while /debug/requests held %s there", p, format.Plural(disagree[p], "silent drop")))
	}
	return "This gauge disagrees with /debug/requests: " + strings.Join(parts, "; ") +
		" (SGLang refreshes decode gauges only after forward steps, so they freeze when decode goes idle)."
}
