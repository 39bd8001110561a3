package render

import (
	"fmt"
	"strings"

	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

// figureLabels are the key figures as people read them.
var figureLabels = map[string]string{
	"requests": "Requests", "throughput": "Throughput", "silent_drops": "Silent drops",
	"ok_rate": "OK rate", "rejected_rate": "Rejected rate",
	"ttft_p50": "TTFT p50", "ttft_p99": "TTFT p99", "itl_p99": "ITL p99", "e2e_p50": "E2E p50", "e2e_p99": "E2E p99",
}

// FigureLabel is a key figure's human label ("TTFT p50" for ttft_p50).
func FigureLabel(fig string) string {
	if l, ok := figureLabels[fig]; ok {
		return l
	}
	return strings.ReplaceAll(fig, "_", " ")
}

// trendChanges says what changed between two consecutive runs of one scenario: the
// scenario's digest and the identity's fields (lines without an identity compare only
// their digests).
func trendChanges(prev, cur reports.HistoryEntry) []string {
	var out []string
	if prev.Digest != cur.Digest {
		out = append(out, fmt.Sprintf("scenario digest %s → %s", prev.Digest, cur.Digest))
	}
	if prev.Identity == nil || cur.Identity == nil {
		return out
	}
	for _, c := range prev.Identity.Changes(*cur.Identity) {
		out = append(out, fmt.Sprintf("%s %s → %s", c.What, format.OrNone(c.From), format.OrNone(c.To)))
	}
	return out
}
