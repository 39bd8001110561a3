package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/reports"
)

// simulateTopology runs sc on the simulated reference topology and returns its events.
func simulateTopology(t *testing.T, yaml string) ([]ledger.Event, *reports.Results) {
	t.Helper()
	sc := parse(t, yaml)
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
	_, err := os.Stat(filepath.Join(dir, ledger.EventsFile))
	require.NoError(t, err)
	evs, _, err := ledger.ReadFile(filepath.Join(dir, ledger.EventsFile))
	require.NoError(t, err)
	return evs, reports.Compute(evs, judge.ReportConfig(sc))
}

const livenessYAML = `
name: sim-liveness
seed: 2
duration: 10s
reference: {prefill: 1, decode: 1, backend: simtime}
workloads:
  - {name: steady, type: open_loop, pacer: {type: constant, rate: 4}, max_tokens: 4}
faults:
  - %s
deadlines: {connect: 5s, first_token: 8s, stall: 8s, total: 15s}
drain: {timeout: 20s, leak_timeout: 5s}
assertions: [no_silent_drops]
`

// The simulated prober applies the runner's liveness rule to the virtual processes: a
// killed process is down after judge.LivenessFailures probes, up again once restarted;
// one that stays dead fails target_alive, as in a real run; a pause shorter than
// judge.LivenessTimeout is no outage (the probe waits, then gets its answer).
func TestSimLiveness(t *testing.T) {
	tests := []struct {
		name, fault string
		down, up    []time.Duration // since load start
		alive       bool            // no target_alive failure
	}{
		{"killed and restarted", "{name: k, type: decode_crash, target: decode-0, at: 2s, for: 2s}",
			[]time.Duration{2500 * time.Millisecond}, []time.Duration{4500 * time.Millisecond}, true},
		{"killed for good", "{name: k, type: prefill_crash, target: prefill-0, at: 2s, for: 1s, params: {restart: false}}",
			// restart: false declares that prefill stays down: explained, not a failure.
			[]time.Duration{2500 * time.Millisecond}, nil, true},
		{"paused briefly", "{name: p, type: process_pause, target: decode-0, at: 2s, for: 3s}", nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, res := simulateTopology(t, fmt.Sprintf(livenessYAML, tt.fault))
			start := ofType(evs, ledger.EventRunStart)[0].Time
			var down, up []time.Duration
			for _, e := range evs {
				switch e.Type {
				case ledger.EventTargetDown:
					down = append(down, e.Time.Sub(start))
					assert.Contains(t, e.URL, "/health")
				case ledger.EventTargetUp:
					up = append(up, e.Time.Sub(start))
				}
			}
			assert.Equal(t, tt.down, down)
			assert.Equal(t, tt.up, up)
			failed := false
			for _, a := range res.Assertions {
				if a.Name == reports.AssertTargetAlive {
					failed = a.State == reports.StateFail
				}
			}
			assert.Equal(t, !tt.alive, failed, "target_alive: %+v", res.Liveness)
		})
	}
}
