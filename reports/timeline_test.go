package reports

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports/internal/fixture"
)

// TestTimelineGolden pins the figures behind every chart (not the pixels).
func TestTimelineGolden(t *testing.T) {
	for _, tc := range []struct {
		name, golden string
		events       func(*testing.T) []ledger.Event
		cfg          Config
	}{
		{"fixture ledger with a fault, drops and gauges", "timeline.golden.json", func(t *testing.T) []ledger.Event { return fixture.ReadEvents(t, "testdata/events.jsonl") }, goldenConfig},
		{"GPU samples and an unrecovered fault", "timeline_gpu.golden.json", func(*testing.T) []ledger.Event { return fixture.GPULedger() }, Config{}},
		{"a long run widens the bins", "timeline_long.golden.json", func(*testing.T) []ledger.Event { return fixture.LongLedger() }, Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(tc.events(t), tc.cfg)
			tl := res.Timeline()
			require.NotNil(t, tl)
			got, err := json.MarshalIndent(tl, "", " ")
			require.NoError(t, err)
			golden(t, tc.golden, append(pointPairs.ReplaceAll(got, []byte("[$1, $2]")), '\n'))
			assert.Len(t, tl.Drops, res.SilentDrops, "every silent drop is marked")
			assert.Len(t, tl.Faults, len(res.Faults), "every fault is shaded")
			assert.LessOrEqual(t, len(tl.InFlight.Points), MaxWindows+1)
		})
	}
}

// pointPairs keeps each [x, y] of a golden timeline on one line.
var pointPairs = regexp.MustCompile(`\[\n\s+([^\s,\[\]{}]+),\n\s+([^\s,\[\]{}]+)\n\s+\]`)
